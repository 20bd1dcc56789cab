/**
 * `charger-sim fleet` started by a parent process with an IPC channel — `charger-platform serve --env sandbox`
 * runs its simulated fleet so (platform/sandbox-fleet.ts). Two messages' worth of protocol:
 *
 * - to the parent, once every charger is planned and the first are starting:
 *   `{ type: 'fleet_started', seed, count, v2g_chargers }`;
 * - from the parent: none. When the channel closes — the parent exited, however: even SIGKILL — the fleet stops
 *   gracefully by itself, so that no simulated charger outlives its platform.
 *
 * Without an IPC channel (a terminal, a script) none of this happens.
 */

export interface FleetStartedMessage {
  type: 'fleet_started';
  seed: number;
  count: number;
  v2g_chargers: number;
}

/** After the parent went away, give the graceful stop this long (the platform is gone: requests fail fast). */
const ORPHAN_EXIT_MS = 30_000;

/**
 * Reports the start to the parent, if there is one, and calls `stop` when it goes away. Returns a function that
 * undoes the watch (at the end of a run that stopped for another reason).
 */
export function linkToParent(started: FleetStartedMessage, stop: () => void): () => void {
  const send = process.send?.bind(process);
  if (!send || !process.connected) return () => undefined;
  const onDisconnect = () => {
    stop();
    // Nobody reads our output any more: a stop that hangs must not leave the process behind.
    setTimeout(() => process.exit(1), ORPHAN_EXIT_MS).unref();
  };
  process.once('disconnect', onDisconnect);
  // The channel must not keep the fleet alive once its run is over.
  process.channel?.unref();
  // With a callback a failed send is not an 'error' event: the parent exited meanwhile, and `disconnect`
  // follows and stops the fleet.
  send(started, () => undefined);
  return () => {
    process.off('disconnect', onDisconnect);
    if (process.connected) process.disconnect();
  };
}

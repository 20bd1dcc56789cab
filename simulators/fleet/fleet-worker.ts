/**
 * One worker thread of a fleet (`fleet-workers.ts`): runs its slice of the chargers with `runFleet` and
 * answers the main thread. Protocol (structured-clone messages):
 * - to the main thread: `live` once a second (its live stats and latency histograms), `window` when asked,
 *   `summary` once stopped, `failed` if its fleet could not start;
 * - from the main thread: `{ type: 'window', id }`, `{ type: 'stop' }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { FleetOptions } from './fleet-options.js';
import { type Fleet, runFleet } from './fleet-runner.js';
import type { FleetToMain, MainToFleet } from './fleet-worker-messages.js';

const port = parentPort;
if (!port) throw new Error('fleet-worker.js runs as a worker thread of charger-sim fleet');

const options = workerData as FleetOptions;
const post = (message: FleetToMain) => port.postMessage(message);

let fleet: Fleet;
try {
  fleet = await runFleet(options);
} catch (error) {
  post({ type: 'failed', message: (error as Error).message });
  process.exit(1);
}

// Live stats for the main thread's progress line and `live()`; the backlog (a query of every store), heap and
// handles every 5 s.
let tick = 0;
const pushLive = () => {
  tick += 1;
  const h = fleet.liveHistograms();
  const every5 = tick % 5 === 1;
  post({
    type: 'live',
    live: fleet.live({ backlog: every5, resources: every5 }),
    latency: h.latency,
    command: h.command,
  });
};
const liveTimer = setInterval(pushLive, 1_000);
pushLive();

port.on('message', (message: MainToFleet) => {
  if (message.type === 'window') {
    post({ type: 'window', id: message.id, parts: fleet.takeWindowParts() });
  } else if (message.type === 'stop') {
    clearInterval(liveTimer);
    void fleet.stop().then((summary) => {
      post({ type: 'summary', summary, histograms: fleet.histograms() });
      port.close();
    });
  }
});

/**
 * The "online" rule (DESIGN.md §7), pure: a charger is online when the platform has seen an authenticated request
 * from it within the window (`ONLINE_WINDOW_SECONDS`), unless it said goodbye with a heartbeat of status
 * `offline` and has made no request since.
 *
 * Storage answers the same question in its query for `GET /v1/operator/devices?status=` (storage/sqlite/devices.ts,
 * `listDevices`): change both together.
 */
export interface SeenState {
  /** Last authenticated request, ms; null when never seen. */
  lastSeenMs: number | null;
  /** Its last word was an `offline` heartbeat. */
  offline: boolean;
}

export function isOnline(state: SeenState, nowMs: number, windowMs: number): boolean {
  if (state.offline || state.lastSeenMs === null) return false;
  return nowMs - state.lastSeenMs <= windowMs;
}

/**
 * What the stored row says when nothing newer is in memory (after a restart): an `offline` heartbeat counts
 * until a later request was seen.
 */
export function seenStateOfRow(row: {
  last_seen_ms: number | null;
  last_heartbeat_ms: number | null;
  reported_status: string | null;
}): SeenState {
  return {
    lastSeenMs: row.last_seen_ms,
    offline:
      row.reported_status === 'offline' &&
      !(row.last_seen_ms !== null && row.last_seen_ms > (row.last_heartbeat_ms ?? 0)),
  };
}

/**
 * The newer of what this instance saw itself (`local`, kept in memory) and what the stored row says, which
 * another instance may have written since (DESIGN.md §13: a charger's requests may reach several instances).
 * The row's last word is its later of the last request and, when it said goodbye, that heartbeat. On a tie the
 * local state stands: it is where the row came from.
 */
export function latestSeenState(
  local: { ms: number; offline: boolean } | undefined,
  row: { last_seen_ms: number | null; last_heartbeat_ms: number | null; reported_status: string | null },
): SeenState {
  const stored = seenStateOfRow(row);
  if (!local) return stored;
  const storedAt = Math.max(
    row.last_seen_ms ?? Number.NEGATIVE_INFINITY,
    stored.offline ? (row.last_heartbeat_ms ?? Number.NEGATIVE_INFINITY) : Number.NEGATIVE_INFINITY,
  );
  return local.ms >= storedAt ? { lastSeenMs: local.ms, offline: local.offline } : stored;
}

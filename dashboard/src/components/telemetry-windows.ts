import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api.js';
import { useApp, useLoad } from '../app-context.js';
import type { TelemetryMessage } from '../fleet.js';
import {
  addBuffered,
  addSample,
  type HistoryItem,
  type HistoryPage,
  type HistoryWindow,
  historyQuery,
  historyWindow,
  readWindow,
  WINDOWS,
  type WindowLength,
} from '../telemetry-history.js';

/** A window's items as read (and, live, as the stream moves it). */
export interface WindowItems {
  window: HistoryWindow;
  items: HistoryItem[];
  loading: boolean;
  error: string | undefined;
  /** False when the window held more pages than the page reads (a charger sending far faster than 1 Hz). */
  complete: boolean;
}

function read(api: ReturnType<typeof useApp>['api'], deviceId: string, w: HistoryWindow) {
  const path = `/v1/operator/devices/${encodeURIComponent(deviceId)}/telemetry`;
  return readWindow((cursor) => api.get<HistoryPage>(path, historyQuery(w, cursor)));
}

/**
 * The window of `length` ending now, read once (every page) and then moved by the stream: each telemetry sample
 * of the charger is added as it comes, whether or not the chart shows this window, so that "now" is current
 * without reading it again. Samples that come while it is read wait and are added after.
 */
export function useLiveWindow(
  deviceId: string,
  length: WindowLength,
): WindowItems & { liveSamples: number; reload: () => void } {
  const { api, live } = useApp();
  const [state, setState] = useState<WindowItems>(() => ({
    window: historyWindow(length, null, Date.now()),
    items: [],
    loading: true,
    error: undefined,
    complete: true,
  }));
  const [liveSamples, setLiveSamples] = useState(0);
  const [generation, setGeneration] = useState(0);
  /** The stream's samples while the window is read; undefined once it is. */
  const waiting = useRef<HistoryItem[] | undefined>(undefined);

  useEffect(() => {
    let current = true;
    const w = historyWindow(length, null, Date.now());
    const held: HistoryItem[] = [];
    waiting.current = held;
    setState({ window: w, items: [], loading: true, error: undefined, complete: true });
    read(api, deviceId, w).then(
      (r) => {
        if (!current) return;
        waiting.current = undefined;
        const items = addBuffered(r.items, held, w, Date.now() - WINDOWS[length].spanMs);
        setState({ window: w, items, loading: false, error: undefined, complete: r.complete });
        setLiveSamples((n) => n + held.length);
      },
      (err: unknown) => {
        if (!current) return;
        waiting.current = undefined;
        setState((s) => ({ ...s, loading: false, error: describeError(err) }));
      },
    );
    return () => {
      current = false;
    };
  }, [api, deviceId, length, generation]);

  useEffect(
    () =>
      live.onMessage((m) => {
        if (m.type !== 'telemetry' || m.device_id !== deviceId) return;
        const sample = m as TelemetryMessage;
        if (waiting.current) {
          waiting.current.push(sample);
          return;
        }
        setState((s) => {
          if (s.loading || s.error) return s;
          const fromMs = Date.now() - WINDOWS[s.window.length].spanMs;
          return { ...s, items: addSample(s.items, sample, s.window.resolution, fromMs) };
        });
        setLiveSamples((n) => n + 1);
      }),
    [live, deviceId],
  );

  // Until the effect has started reading a new length, what is held is the old length's window.
  const stale = state.window.length !== length;
  return {
    ...state,
    items: stale ? [] : state.items,
    loading: state.loading || stale,
    liveSamples,
    reload: () => setGeneration((g) => g + 1),
  };
}

/** A window in the past (`endMs`), read once; undefined while the chart is live (`endMs` null). */
export function usePastWindow(
  deviceId: string,
  length: WindowLength,
  endMs: number | null,
): (WindowItems & { reload: () => void }) | undefined {
  const { api } = useApp();
  const w = endMs === null ? undefined : historyWindow(length, endMs, endMs);
  const key = `${length}|${endMs}`;
  const loaded = useLoad(
    async () => (w ? { key, ...(await read(api, deviceId, w)) } : undefined),
    [api, deviceId, length, endMs],
  );
  if (!w) return undefined;
  // useLoad keeps the window before until its effect starts the next read: none of it is shown meanwhile.
  const fresh = loaded.data?.key === key;
  return {
    window: w,
    items: fresh && !loaded.loading ? (loaded.data?.items ?? []) : [],
    loading: loaded.loading || (!fresh && !loaded.error),
    error: loaded.error,
    complete: loaded.data?.complete ?? true,
    reload: loaded.reload,
  };
}

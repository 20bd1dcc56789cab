import type { StreamMessage } from './fleet.js';

/**
 * The live telemetry stream (`wss://HOST/v1/operator/stream`, DESIGN.md §8) for the whole dashboard: one
 * connection subscribed to the operator's sites, shared by every page, reconnecting with backoff. Each connection
 * opens with a one-use ticket (`POST /v1/operator/stream/tickets`) in `?ticket=`: browsers cannot set headers on a
 * WebSocket, and the access token never goes into a URL.
 */
export type LinkState =
  | 'connecting'
  | 'live'
  | 'reconnecting'
  /** 4429: another tab or program of this client holds the same subscription. */
  | 'elsewhere'
  /** 4401: the token expired. */
  | 'expired'
  /** The client sees no site: nothing to follow. */
  | 'no-sites'
  | 'closed';

export interface LiveStream {
  subscribeSites(siteIds: readonly string[]): void;
  onMessage(listener: (m: StreamMessage) => void): () => void;
  onState(listener: (s: LinkState) => void): () => void;
  state(): LinkState;
  close(): void;
}

const BACKOFF_MS = [1_000, 2_000, 5_000, 10_000, 30_000];
const PING_EVERY_MS = 25_000;

/** `ticket` asks the platform for a new stream ticket (one per connection). */
export function openLiveStream(ticket: () => Promise<string>): LiveStream {
  const messageListeners = new Set<(m: StreamMessage) => void>();
  const stateListeners = new Set<(s: LinkState) => void>();
  let sites: readonly string[] = [];
  let socket: WebSocket | undefined;
  let state: LinkState = 'connecting';
  let attempt = 0;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let pingTimer: ReturnType<typeof setInterval> | undefined;
  let closed = false;
  /** A ticket is being asked for: no second connection meanwhile. */
  let opening = false;

  const setState = (s: LinkState) => {
    if (s === state) return;
    state = s;
    for (const l of stateListeners) l(s);
  };

  const sendSubscription = () => {
    if (socket?.readyState !== WebSocket.OPEN || sites.length === 0) return;
    socket.send(JSON.stringify({ type: 'subscribe', site_ids: sites.slice(0, 100) }));
  };

  const retryLater = (code?: number) => {
    if (code === 4429) setState('elsewhere');
    else setState('reconnecting');
    const wait = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)] ?? 30_000;
    attempt++;
    retryTimer = setTimeout(connect, code === 4429 ? 30_000 : wait);
  };

  const connect = () => {
    if (closed || sites.length === 0 || opening || socket) return;
    opening = true;
    ticket().then(
      (t) => {
        opening = false;
        if (!closed && sites.length > 0 && !socket) open(t);
      },
      () => {
        // A refused token signs the page out (api.ts); anything else is tried again.
        opening = false;
        if (!closed) retryLater();
      },
    );
  };

  const open = (t: string) => {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(
      `${scheme}//${location.host}/v1/operator/stream?ticket=${encodeURIComponent(t)}`,
    );
    socket = ws;
    ws.onopen = () => {
      attempt = 0;
      sendSubscription();
      pingTimer = setInterval(
        () => ws.readyState === WebSocket.OPEN && ws.send('{"type":"ping"}'),
        PING_EVERY_MS,
      );
    };
    ws.onmessage = (event) => {
      let m: StreamMessage;
      try {
        m = JSON.parse(String(event.data)) as StreamMessage;
      } catch {
        return;
      }
      if (m.type === 'subscribed') setState('live');
      for (const l of messageListeners) l(m);
    };
    ws.onclose = (event) => {
      clearInterval(pingTimer);
      if (socket !== ws || closed) return;
      socket = undefined;
      if (event.code === 4401) return setState('expired');
      retryLater(event.code);
    };
  };

  return {
    subscribeSites(siteIds) {
      if (siteIds.length === 0) {
        sites = [];
        socket?.close(1000);
        socket = undefined;
        return setState('no-sites');
      }
      const same = siteIds.length === sites.length && siteIds.every((s, i) => s === sites[i]);
      if (same) return;
      sites = [...siteIds];
      if (socket) sendSubscription();
      else connect();
    },
    onMessage(listener) {
      messageListeners.add(listener);
      return () => messageListeners.delete(listener);
    },
    onState(listener) {
      stateListeners.add(listener);
      return () => stateListeners.delete(listener);
    },
    state: () => state,
    close() {
      closed = true;
      clearTimeout(retryTimer);
      clearInterval(pingTimer);
      socket?.close(1000);
      socket = undefined;
      setState('closed');
    },
  };
}

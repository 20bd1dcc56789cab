import { createContext } from 'preact';
import { useContext, useEffect, useState } from 'preact/hooks';
import { type Api, describeError } from './api.js';
import type { FleetSnapshot, FleetStore } from './fleet-store.js';
import type { LinkState, LiveStream } from './live-stream.js';
import type { Session } from './session.js';

/** What every page of a signed-in dashboard shares. */
export interface AppServices {
  session: Session;
  api: Api;
  live: LiveStream;
  fleet: FleetStore;
  canWrite: boolean;
}

export const AppContext = createContext<AppServices | undefined>(undefined);

export function useApp(): AppServices {
  const app = useContext(AppContext);
  if (!app) throw new Error('useApp outside a signed-in dashboard');
  return app;
}

export function useFleet(): FleetSnapshot {
  const { fleet } = useApp();
  const [snap, setSnap] = useState(fleet.snapshot());
  useEffect(() => {
    setSnap(fleet.snapshot());
    return fleet.subscribe(() => setSnap(fleet.snapshot()));
  }, [fleet]);
  return snap;
}

export function useLinkState(): LinkState {
  const { live } = useApp();
  const [state, setState] = useState(live.state());
  useEffect(() => live.onState(setState), [live]);
  return state;
}

/** The clock, ticking every `everyMs` (for "12 s ago" and charts that move). */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

export interface Loaded<T> {
  data: T | undefined;
  error: string | undefined;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` when `deps` change (and on `reload()`); a late answer for older deps is dropped. */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: string | undefined; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true,
  });
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    let current = true;
    setState((s) => ({ ...s, loading: true, error: undefined }));
    load().then(
      (data) => current && setState({ data, error: undefined, loading: false }),
      (err: unknown) => current && setState({ data: undefined, error: describeError(err), loading: false }),
    );
    return () => {
      current = false;
    };
  }, [...deps, generation]);
  return { ...state, reload: () => setGeneration((g) => g + 1) };
}

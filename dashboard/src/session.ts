/**
 * The signed-in session: the access token and when it expires. Kept in memory; a copy in `sessionStorage`
 * (this tab only, gone when it closes; never `localStorage`, DESIGN.md §16) lets a reload stay signed in.
 * Client secrets are never kept: when the token expires, the operator signs in again.
 */
export interface Session {
  clientId: string;
  token: string;
  scope: string | undefined;
  expiresAtMs: number;
}

const KEY = 'charger-platform.dashboard.session';

export function loadSession(nowMs: number): Session | undefined {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (!raw) return undefined;
    const s = JSON.parse(raw) as Partial<Session>;
    if (typeof s.token !== 'string' || typeof s.clientId !== 'string' || typeof s.expiresAtMs !== 'number') {
      return undefined;
    }
    if (s.expiresAtMs <= nowMs) {
      sessionStorage.removeItem(KEY);
      return undefined;
    }
    return { clientId: s.clientId, token: s.token, scope: s.scope, expiresAtMs: s.expiresAtMs };
  } catch {
    return undefined;
  }
}

export function saveSession(session: Session | undefined): void {
  try {
    if (session) sessionStorage.setItem(KEY, JSON.stringify(session));
    else sessionStorage.removeItem(KEY);
  } catch {
    // Storage refused (private mode, quota): the session simply does not survive a reload.
  }
}

export function canWrite(session: Session): boolean {
  return session.scope === undefined || session.scope.split(' ').includes('write');
}

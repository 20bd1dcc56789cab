import { useState } from 'preact/hooks';
import { describeError, requestToken } from '../api.js';
import type { Session } from '../session.js';

/** Client credentials in, a session out. The secret is sent once and never kept. */
export function SignIn({ notice, onSignedIn }: { notice?: string; onSignedIn: (s: Session) => void }) {
  const [clientId, setClientId] = useState('');
  const [secret, setSecret] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const t = await requestToken(clientId.trim(), secret);
      setSecret('');
      onSignedIn({
        clientId: clientId.trim(),
        token: t.access_token,
        scope: t.scope,
        expiresAtMs: Date.now() + t.expires_in * 1000,
      });
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="sign-in">
      <form class="panel" onSubmit={submit} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">Charger platform</h1>
        <p class="muted">Sign in with an API client's credentials (the sandbox banner prints one).</p>
        {notice ? (
          <p class="notice" role="status">
            {notice}
          </p>
        ) : null}
        <label>
          Client ID
          <input
            name="client_id"
            autoComplete="username"
            required
            value={clientId}
            onInput={(e) => setClientId(e.currentTarget.value)}
          />
        </label>
        <label>
          Client secret
          <input
            name="client_secret"
            type="password"
            autoComplete="current-password"
            required
            value={secret}
            onInput={(e) => setSecret(e.currentTarget.value)}
          />
        </label>
        {error ? (
          <p class="error" role="alert">
            {error}
          </p>
        ) : null}
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { createApi } from './api.js';
import { AppContext, type AppServices } from './app-context.js';
import { Layout } from './components/layout.js';
import { createFleetStore } from './fleet-store.js';
import { openLiveStream } from './live-stream.js';
import { DevicePage } from './pages/device.js';
import { FirmwarePage } from './pages/firmware.js';
import { Overview } from './pages/overview.js';
import { RecordsPage } from './pages/records.js';
import { SignIn } from './pages/sign-in.js';
import { SitePage } from './pages/site.js';
import { UpdatePage } from './pages/update.js';
import { parseRoute, type Route } from './router.js';
import { canWrite, loadSession, type Session, saveSession } from './session.js';

function useRoute(): Route {
  const [route, setRoute] = useState(parseRoute(location.hash));
  useEffect(() => {
    const onHash = () => {
      setRoute(parseRoute(location.hash));
      document.getElementById('main')?.focus();
    };
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  return route;
}

function App() {
  const [session, setSession] = useState<Session | undefined>(() => loadSession(Date.now()));
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const route = useRoute();

  const signOut = (why?: string) => {
    saveSession(undefined);
    setSession(undefined);
    setNotice(why);
  };

  if (!session) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(s) => {
          saveSession(s);
          setNotice(undefined);
          setSession(s);
        }}
      />
    );
  }
  return <SignedIn key={session.token} session={session} route={route} signOut={signOut} />;
}

function SignedIn({
  session,
  route,
  signOut,
}: {
  session: Session;
  route: Route;
  signOut: (why?: string) => void;
}) {
  const services = useMemo<AppServices>(() => {
    const api = createApi(session.token, (error) =>
      signOut(error.code === 2002 ? 'Your session expired; sign in again.' : `Signed out: ${error.message}`),
    );
    const live = openLiveStream(() =>
      api.post<{ ticket: string }>('/v1/operator/stream/tickets').then((answer) => answer.ticket),
    );
    return { session, api, live, fleet: createFleetStore(api, live), canWrite: canWrite(session) };
  }, [session.token]);

  useEffect(() => {
    void services.fleet.load();
    const expiry = setTimeout(
      () => signOut('Your session expired; sign in again.'),
      Math.max(0, session.expiresAtMs - Date.now()),
    );
    const offState = services.live.onState((s) => {
      if (s === 'expired') signOut('Your session expired; sign in again.');
    });
    return () => {
      clearTimeout(expiry);
      offState();
      services.live.close();
    };
  }, [services]);

  return (
    <AppContext.Provider value={services}>
      <Layout route={route} onSignOut={() => signOut('Signed out.')}>
        <Page route={route} />
      </Layout>
    </AppContext.Provider>
  );
}

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case 'overview':
      return <Overview />;
    case 'site':
      return <SitePage key={route.siteId} siteId={route.siteId} />;
    case 'device':
      return <DevicePage key={route.deviceId} deviceId={route.deviceId} />;
    case 'records':
      return <RecordsPage query={route.query} />;
    case 'firmware':
      return <FirmwarePage query={route.query} />;
    case 'update':
      return <UpdatePage key={route.updateId} updateId={route.updateId} />;
    default:
      return (
        <section class="panel">
          <h1>Not found</h1>
          <p>
            There is no page <code>{route.hash}</code>. <a href="#/">Back to the fleet</a>.
          </p>
        </section>
      );
  }
}

const root = document.getElementById('app');
if (root) render(<App />, root);

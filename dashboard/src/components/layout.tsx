import type { ComponentChildren } from 'preact';
import { useApp, useLinkState } from '../app-context.js';
import type { LinkState } from '../live-stream.js';
import { href, type Route } from '../router.js';

const LINK_TEXT: Record<LinkState, string> = {
  connecting: 'connecting…',
  live: 'live',
  reconnecting: 'reconnecting…',
  elsewhere: 'live updates open in another tab',
  expired: 'session expired',
  'no-sites': 'no sites to follow',
  closed: 'offline',
};

export function Layout({
  route,
  onSignOut,
  children,
}: {
  route: Route;
  onSignOut: () => void;
  children: ComponentChildren;
}) {
  const { session } = useApp();
  const link = useLinkState();
  const current = (page: Route['page']) => (route.page === page ? 'page' : undefined);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <nav aria-label="Main">
          <a href={href.overview()} aria-current={current('overview')} class="brand">
            Charger platform
          </a>
          <a href={href.overview()} aria-current={current('overview')}>
            Fleet
          </a>
          <a href={href.records()} aria-current={current('records')}>
            Charging records
          </a>
          <a
            href={href.firmware()}
            aria-current={route.page === 'firmware' || route.page === 'update' ? 'page' : undefined}
          >
            Firmware
          </a>
        </nav>
        <div class="who">
          <span class={`live live-${link}`} role="status" aria-live="polite" data-link={link}>
            {LINK_TEXT[link]}
          </span>
          <span class="client" title="Signed in as this API client">
            {session.clientId}
          </span>
          <button type="button" class="secondary" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </>
  );
}

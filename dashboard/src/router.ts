/** The dashboard's pages, addressed by the URL's fragment so that the platform serves one path (`/dashboard`). */
export type Route =
  | { page: 'overview' }
  | { page: 'site'; siteId: string }
  | { page: 'device'; deviceId: string }
  | { page: 'records'; query: URLSearchParams }
  | { page: 'firmware'; query: URLSearchParams }
  | { page: 'update'; updateId: string }
  | { page: 'not-found'; hash: string };

const ID = /^[A-Za-z0-9_-]{1,128}$/;

export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#/, '') || '/';
  const [pathname = '/', search = ''] = path.split('?', 2);
  const parts = pathname.split('/').filter((p) => p !== '');
  if (parts.length === 0) return { page: 'overview' };
  const [first, second] = parts;
  if (parts.length === 2 && first === 'sites' && second && ID.test(second))
    return { page: 'site', siteId: second };
  if (parts.length === 2 && first === 'devices' && second && ID.test(second)) {
    return { page: 'device', deviceId: second };
  }
  if (parts.length === 1 && first === 'records')
    return { page: 'records', query: new URLSearchParams(search) };
  if (parts.length === 1 && first === 'firmware')
    return { page: 'firmware', query: new URLSearchParams(search) };
  if (parts.length === 2 && first === 'updates' && second && ID.test(second))
    return { page: 'update', updateId: second };
  return { page: 'not-found', hash: path };
}

export const href = {
  overview: () => '#/',
  site: (siteId: string) => `#/sites/${encodeURIComponent(siteId)}`,
  device: (deviceId: string) => `#/devices/${encodeURIComponent(deviceId)}`,
  records: (query?: URLSearchParams) => {
    const q = query?.toString();
    return q ? `#/records?${q}` : '#/records';
  },
  /** The Firmware page; `agent_version=` or `firmware_version=` lists the chargers on that version. */
  firmware: (query?: URLSearchParams) => {
    const q = query?.toString();
    return q ? `#/firmware?${q}` : '#/firmware';
  },
  update: (updateId: string) => `#/updates/${encodeURIComponent(updateId)}`,
};

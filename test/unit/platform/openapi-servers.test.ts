import { describe, expect, it } from 'vitest';
import { serversFor } from '../../../platform/http/openapi.js';

describe('servers of the served document', () => {
  it.each([
    [
      'production',
      'platform.example:8443',
      'Production: this platform (where this document was fetched from)',
    ],
    [
      'sandbox',
      '127.0.0.1:8443',
      'Sandbox (test data and simulated chargers): this platform (where this document was fetched from)',
    ],
  ] as const)('%s at %s names its environment', (env, host, description) => {
    expect(serversFor(host, env)).toEqual([{ url: `https://${host}`, description, 'x-environment': env }]);
  });

  it.each([undefined, 'evil"/><script>', 'a b'])(
    'a Host of %s gets the template, environment named',
    (host) => {
      const [server] = serversFor(host, 'sandbox');
      expect(server).toMatchObject({ url: 'https://{host}', 'x-environment': 'sandbox' });
      expect(server!.description).toMatch(/^Sandbox/);
    },
  );
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveOf, CHUNK, diagnosticsCalls, sha256 } from '../helpers/diagnostics-calls.js';
import { instancesOverRedis } from '../helpers/instances.js';
import { createTenant, registerDevice, type TestPlatform } from '../helpers/platform.js';

/**
 * Diagnostics (DESIGN.md §20) across two instances over one PostgreSQL database and one Redis (§13): the archive is
 * in the database, so a charger that begins its upload on one instance goes on with the other after a cut, and
 * either instance serves the download. PostgreSQL only (`npm run test:postgres`).
 */
const cluster = instancesOverRedis('cp-diagnostics-instances-');
let a: TestPlatform;
let b: TestPlatform;

beforeAll(async () => {
  await cluster.start();
  a = await cluster.instance('inst-a');
  b = await cluster.instance('inst-b');
}, 60_000);
afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await cluster.stop();
});

describe('diagnostics on two instances', () => {
  it('an upload cut on one instance goes on with the other; both serve the same archive', async () => {
    const onA = diagnosticsCalls(() => a);
    const onB = diagnosticsCalls(() => b);
    const tenant = await createTenant(a, 'Instances Diagnostics');
    const d = await registerDevice(a, `SN-DIAG-INST-${process.pid}`, tenant.siteId);
    const { diagnostics_id: id } = await onA.requested(tenant.token, d);
    const archive = archiveOf(3 * CHUNK);

    await onA.putCut(d, id, archive, 0, 2 * CHUNK);
    await new Promise((r) => setTimeout(r, 200));
    const held = await onB.state(d, id);
    expect(held.body.data).toMatchObject({ status: 'uploading', received: 2 * CHUNK, size: archive.length });
    const rest = await onB.put(d, id, archive, { first: 2 * CHUNK });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.data).toMatchObject({ status: 'available', received: archive.length });

    for (const on of [a, b]) {
      const got = await onA.content(tenant.token, id, {}, on);
      expect(got.status).toBe(200);
      expect(got.headers.etag).toBe(`"${sha256(archive)}"`);
      expect(got.body.equals(archive)).toBe(true);
    }
    expect((await onA.view(tenant.token, id)).body.data).toMatchObject({
      status: 'available',
      sha256: sha256(archive),
    });
  });
});

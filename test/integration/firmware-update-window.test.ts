import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ChargerGroup,
  deviceOf,
  firmwareHistory,
  rateLimitsButOperatorReads,
  startChargers,
  stateOf,
  uploadSignedFirmware,
  waitForUpdate,
} from '../helpers/firmware-agents.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * An update with an install `window` (DESIGN.md §19) carried out by real agents on the simulated HAL, on the night
 * Europe/Berlin moves to summer time (2027-03-28: 02:00 CET becomes 03:00 CEST). The window 01:30–03:30 in the
 * site's time zone is then one hour long, 00:30–01:30 UTC. The chargers' clocks are set on that night (the
 * platform's with them); their timers stay real.
 *
 * - One charger's clock reads 01:29:52 CET, before the window: it holds `install_scheduled` until 00:30 UTC, then
 *   installs.
 * - The other's reads 03:31 CEST, just after the window closed: it holds until the next night's 01:30 CEST
 *   (23:30 UTC). A charger reading the window with a fixed offset of one hour would take 03:31 for 02:31, inside.
 */
const oem = generateKeyPairSync('ed25519');
const NEW = '2.0.0';
const OPENS = Date.UTC(2027, 2, 28, 0, 30);
const NEXT_NIGHT = '2027-03-28T23:30:00.000Z';
/** Real seconds from the chargers' start to the window's opening on the first one's clock. */
const LEAD_MS = 8_000;

let tp: TestPlatform;
let group: ChargerGroup | undefined;

beforeAll(async () => {
  tp = await startTestPlatform({ rateLimitStore: rateLimitsButOperatorReads() });
});
afterAll(async () => {
  await group?.stop();
  await tp?.stop();
});

describe('an install window in the site time zone across the change to summer time', () => {
  it('installs when the window opens by the site clock, and holds a charger past its end until the next night', async () => {
    const offset = OPENS - LEAD_MS - Date.now();
    // The platform lives on the same night: its commands, tokens and reports are dated by it.
    tp.advance(offset);
    const tenant = await createTenant(tp, 'Window DST');
    const site = await tp.store.createSite({
      operator_id: tenant.operatorId,
      name: 'Berlin depot',
      timezone: 'Europe/Berlin',
    });
    const artifactId = (await uploadSignedFirmware(tp, tenant.token, oem.privateKey, NEW)).artifact_id;
    group = await startChargers(tp, {
      siteId: site.site_id,
      updateKey: oem.publicKey,
      tag: 'window',
      hals: [{}, {}],
      clockOffsetsMs: [offset, offset + 61 * 60_000],
    });
    const [early, late] = group.chargers as [(typeof group.chargers)[0], (typeof group.chargers)[0]];
    const res = await tp.http.post('/v1/operator/updates', {
      token: tenant.token,
      json: {
        artifact_id: artifactId,
        target_type: 'site',
        target_ids: [site.site_id],
        install: 'immediate',
        window: { start: '01:30', end: '03:30' },
        rollout: { health_seconds: 1 },
      },
    });
    expect(res.status, res.text).toBe(200);
    const updateId = res.body.data.update_id as string;
    const history = (deviceId: string) => firmwareHistory(tp, tenant.token, deviceId, updateId);

    // Both downloaded and checked the image, and wait for their windows.
    let view = await waitForUpdate(tp, tenant.token, updateId, (v) =>
      [early, late].every((c) => stateOf(v, c.deviceId) === 'install_scheduled'),
    );
    expect(view.progress, JSON.stringify(view)).toEqual({ install_scheduled: 2 });
    expect(Date.now() + offset).toBeLessThan(OPENS);
    expect((await history(early.deviceId))[0]).toMatchObject({
      status: 'install_scheduled',
      message: 'outside the install window 01:30-03:30 (Europe/Berlin); opens at 2027-03-28T00:30:00.000Z',
    });
    expect((await history(late.deviceId))[0]).toMatchObject({
      status: 'install_scheduled',
      message: `outside the install window 01:30-03:30 (Europe/Berlin); opens at ${NEXT_NIGHT}`,
    });

    view = await waitForUpdate(
      tp,
      tenant.token,
      updateId,
      (v) => stateOf(v, early.deviceId) === 'succeeded',
      LEAD_MS + 15_000,
    );
    expect(deviceOf(view, early.deviceId)).toMatchObject({ state: 'succeeded', version_after: NEW });
    const installing = (await history(early.deviceId)).find((r) => r.status === 'installing');
    // Not a moment before the window opened on the site's clock.
    expect(Date.parse(installing?.timestamp ?? '')).toBeGreaterThanOrEqual(OPENS);
    expect(await early.hal.firmwareVersion?.()).toBe(NEW);

    // The other one is still waiting for the next night, its firmware untouched.
    expect(stateOf(view, late.deviceId)).toBe('install_scheduled');
    expect(view.status).toBe('running');
    expect((await history(late.deviceId)).map((r) => r.status)).not.toContain('installing');
    expect(await late.hal.firmwareVersion?.()).toBe('1.0.0-sim');
  });
});

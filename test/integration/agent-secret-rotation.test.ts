import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { type Identity, openAgentStore } from '../../agent/store/agent-store.js';
import { createSimulatedHal } from '../../simulators/simulated-hal.js';
import { offsetClock, quietLogger, tempDir, waitFor } from '../helpers/agent.js';
import { type AnswerCutter, answerCutter } from '../helpers/answer-cutter.js';
import { expectError, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * Two-phase secret rotation end to end (DESIGN.md §17): the real agent runtime against a real platform over
 * HTTPS. Rotation is on by default (every 90 days), so each charger's clock is moved 91 days on to start one.
 * The answer to each step is cut on its way back (the platform has acted, the charger never hears it) and the
 * agent is killed right there — the link dies first, so nothing more reaches the platform, and only what the
 * store committed survives into the next start. Whatever the step, the charger gets back in and keeps
 * uploading, and once it is through (or the grace is over) exactly one secret works: the new one.
 */

const DAY = 86_400_000;
const HOUR = 3_600_000;

let tp: TestPlatform;
let cutter: AnswerCutter;

beforeAll(async () => {
  tp = await startTestPlatform();
  cutter = answerCutter(tp.ca);
});
afterAll(async () => {
  await cutter?.close();
  await tp?.stop();
});

interface Charger {
  sn: string;
  dir: ReturnType<typeof tempDir>;
  /** The agent's clock runs this far ahead of the system's. */
  offset: number;
  agent?: AgentRuntime;
  deviceId?: string;
}
const chargers: Charger[] = [];
let seq = 0;
function charger(): Charger {
  seq += 1;
  const c: Charger = { sn: `ROTATE-${process.pid}-${seq}`, dir: tempDir('agent-rotation-'), offset: 0 };
  chargers.push(c);
  return c;
}
afterEach(async () => {
  cutter.setDown(false);
  for (const c of chargers.splice(0)) {
    await c.agent?.stop().catch(() => undefined);
    c.dir.remove();
  }
});

async function start(c: Charger): Promise<AgentRuntime> {
  const agent = await startAgent({
    // No `secretRotationDays`: the default (90 days) is under test.
    config: { dataDir: c.dir.dir, platformUrl: tp.url, sn: c.sn },
    hal: createSimulatedHal({
      connectors: 1,
      seed: seq,
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Infinity,
    }),
    logger: quietLogger(),
    clock: offsetClock(() => c.offset),
    dispatcher: cutter.dispatcher,
    tuning: {
      heartbeatIntervalMs: 400,
      pollWaitSeconds: 1,
      telemetry: { activeMs: 400, idleMs: 400 },
      sampleTickMs: 400,
      backoff: { baseMs: 50, capMs: 300 },
      flushPaceMs: 5,
      requestTimeoutMs: 3_000,
      shutdownFlushMs: 300,
      shutdownHeartbeatMs: 300,
    },
  });
  c.agent = agent;
  c.deviceId = (await agent.registered)?.deviceId;
  return agent;
}

/** A power cut: the link is gone first, so nothing more reaches the platform; the store keeps what it committed. */
async function kill(c: Charger): Promise<Identity> {
  cutter.setDown(true);
  await c.agent?.stop();
  c.agent = undefined;
  cutter.setDown(false);
  const store = openAgentStore(c.dir.dir, { readonly: true });
  try {
    const identity = store.getIdentity();
    if (!identity) throw new Error('the store lost its identity');
    return identity;
  } finally {
    store.close();
  }
}

const tokenFor = (deviceId: string, secret: string) =>
  tp.http.post('/v1/device/token', {
    json: { device_id: deviceId, device_secret: secret, grant_type: 'client_credentials' },
  });
/** The platform's view of a device's secrets (the test reads its store; it never offers a pending secret). */
async function platformSecrets(deviceId: string) {
  const row = await tp.store.getDevice(deviceId);
  const open = (sealed: string | null | undefined) =>
    sealed ? tp.platform.context.keys.openSecret(sealed) : undefined;
  return {
    current: open(row?.secret_sealed),
    pending: open(row?.pending_secret_sealed),
    gen: row?.secret_gen,
  };
}

/** A heartbeat answered and telemetry delivered after this point. */
async function expectConnected(c: Charger): Promise<void> {
  const agent = c.agent;
  if (!agent) throw new Error('not running');
  const from = Date.now() + c.offset; // the agent's clock
  const sent = agent.stats().uplink.delivered.telemetry;
  const delivered = await waitFor(
    () => agent.stats().uplink.delivered.telemetry,
    (n) => n >= sent + 3,
    10_000,
  );
  expect(delivered).toBeGreaterThanOrEqual(sent + 3);
  // One beat may meet the device's rate limit while a backlog is flushed; a later one gets through.
  const beat = await waitFor(
    () => agent.store.getState('last_heartbeat'),
    (h) => h?.ok === true && Date.parse(h.at) >= from,
    10_000,
  );
  expect(beat).toMatchObject({ ok: true });
}

/** The agent has switched to `secret` and holds nothing else. */
async function switchedTo(c: Charger, secret: string): Promise<void> {
  const identity = await waitFor(
    () => c.agent?.store.getIdentity(),
    (i) => i?.secret === secret && i.pendingSecret === undefined,
    10_000,
  );
  expect(identity?.secret).toBe(secret);
  expect(identity?.pendingSecret).toBeUndefined();
}

/** Exactly one secret works: `current`; `old` and a pending one are gone. */
async function onlyOneSecret(deviceId: string, current: string, old: string): Promise<void> {
  expectError(await tokenFor(deviceId, old), 401, 2001);
  expect((await tokenFor(deviceId, current)).status).toBe(200);
  expect(await platformSecrets(deviceId)).toEqual({ current, pending: undefined, gen: 2 });
}

async function registeredCharger(): Promise<{
  c: Charger;
  agent: AgentRuntime;
  deviceId: string;
  old: string;
}> {
  const c = charger();
  const agent = await start(c);
  await expectConnected(c);
  const identity = agent.store.getIdentity();
  if (!c.deviceId || !identity) throw new Error('not registered');
  expect(identity.secretRotatedAt).toBeUndefined();
  return { c, agent, deviceId: c.deviceId, old: identity.secret };
}

describe('two-phase secret rotation, the agent against a real platform', () => {
  it('rotates by default after 90 days, without a pause in uploads', async () => {
    const { c, agent, deviceId, old } = await registeredCharger();
    c.offset = 89 * DAY;
    await expectConnected(c);
    expect(agent.store.getIdentity()?.secret).toBe(old);
    c.offset = 91 * DAY;
    const fresh = await waitFor(
      () => agent.store.getIdentity(),
      (i) => i?.secret !== old && i?.pendingSecret === undefined,
      10_000,
    );
    expect(fresh?.secretRotatedAt).toBeDefined();
    await expectConnected(c);
    await onlyOneSecret(deviceId, fresh?.secret ?? '', old);
  });

  it('a lost rotation answer is asked for again, and the platform answers the same secret', async () => {
    const { c, deviceId, old } = await registeredCharger();
    const cut = cutter.cut({ path: '/v1/device/secret/rotate', lose: 'answer' });
    c.offset = 91 * DAY;
    await cut;
    const { pending } = await platformSecrets(deviceId);
    expect(pending).toBeDefined();
    await switchedTo(c, pending ?? '');
    await expectConnected(c);
    await onlyOneSecret(deviceId, pending ?? '', old);
  });

  it('killed after the platform answered the rotation, before the answer arrived: asks again after the restart', async () => {
    const { c, deviceId, old } = await registeredCharger();
    const cut = cutter.cut({ path: '/v1/device/secret/rotate', lose: 'answer', thenDown: true });
    c.offset = 91 * DAY;
    await cut;
    const { pending } = await platformSecrets(deviceId);
    expect(pending).toBeDefined();
    const stored = await kill(c);
    expect(stored.secret).toBe(old);
    expect(stored.pendingSecret).toBeUndefined();
    // The grace keeps the old secret working while the charger is away.
    expect((await tokenFor(deviceId, old)).status).toBe(200);

    await start(c);
    await switchedTo(c, pending ?? '');
    await expectConnected(c);
    await onlyOneSecret(deviceId, pending ?? '', old);
  });

  it('killed after storing the new secret, before using it: back within the grace, the new secret is used first', async () => {
    const { c, deviceId, old } = await registeredCharger();
    const cut = cutter.cut({
      path: '/v1/device/token',
      body: (b) => !b.includes(old),
      lose: 'request',
      thenDown: true,
    });
    c.offset = 91 * DAY;
    await cut;
    const { pending } = await platformSecrets(deviceId);
    const stored = await kill(c);
    // Committed before it was used, beside the old secret.
    expect(stored).toMatchObject({ secret: old, pendingSecret: pending });

    await start(c);
    await switchedTo(c, pending ?? '');
    await expectConnected(c);
    await onlyOneSecret(deviceId, pending ?? '', old);
  });

  it('killed after the platform switched on the new secret, before its token arrived: back with the new secret', async () => {
    const { c, deviceId, old } = await registeredCharger();
    const cut = cutter.cut({
      path: '/v1/device/token',
      body: (b) => !b.includes(old),
      lose: 'answer',
      thenDown: true,
    });
    c.offset = 91 * DAY;
    await cut;
    // The platform switched when it issued that token: the old secret and its tokens are already retired.
    const platform = await platformSecrets(deviceId);
    expect(platform).toMatchObject({ pending: undefined, gen: 2 });
    expectError(await tokenFor(deviceId, old), 401, 2001);
    const stored = await kill(c);
    expect(stored).toMatchObject({ secret: old, pendingSecret: platform.current });

    await start(c);
    await switchedTo(c, platform.current ?? '');
    await expectConnected(c);
    await onlyOneSecret(deviceId, platform.current ?? '', old);
  });

  it('killed with the new secret stored and away past the grace: only the new secret works, and the charger has it', async () => {
    const { c, deviceId, old } = await registeredCharger();
    const cut = cutter.cut({
      path: '/v1/device/token',
      body: (b) => !b.includes(old),
      lose: 'request',
      thenDown: true,
    });
    c.offset = 91 * DAY;
    await cut;
    const { pending } = await platformSecrets(deviceId);
    expect(await kill(c)).toMatchObject({ secret: old, pendingSecret: pending });

    // A day and more without the charger: the platform retires the old secret and keeps the new one.
    tp.advance(25 * HOUR);
    expectError(await tokenFor(deviceId, old), 401, 2001);
    await tp.platform.sweep();
    expect(await platformSecrets(deviceId)).toEqual({ current: pending, pending: undefined, gen: 2 });

    c.offset = 92 * DAY;
    await start(c);
    await switchedTo(c, pending ?? '');
    await expectConnected(c);
    await onlyOneSecret(deviceId, pending ?? '', old);
  });
});

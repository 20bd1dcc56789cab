import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../../agent/clock.js';
import type { ConnectorInfo } from '../../../agent/hal.js';
import type { Uplink } from '../../../agent/link/uplink.js';
import { createSampler } from '../../../agent/runtime/sampler.js';
import { type AgentStore, openAgentStore } from '../../../agent/store/agent-store.js';
import type { TelemetryRecord } from '../../../shared/device-api.js';
import { createSimulatedHal, type SimulatedHal } from '../../../simulators/simulated-hal.js';
import { quietLogger, tempDir } from '../../helpers/agent.js';

const START = Date.parse('2026-02-10T08:00:00Z');
const connectors: ConnectorInfo[] = [{ connectorId: 1, ratedPowerKw: 22, v2gCapable: false }];
const ev = { capacityKwh: 60, soc: 40, maxChargeKw: 11, maxDischargeKw: 11 };

function recordingUplink() {
  const sent: TelemetryRecord[][] = [];
  const uplink = {
    sendTelemetry: async (records: readonly TelemetryRecord[]) => {
      if (records.length > 0) sent.push([...records]);
    },
    notify: () => undefined,
  } as unknown as Uplink;
  return { uplink, sent };
}

describe('sampler: telemetry cadence and sessions', () => {
  let tmp: ReturnType<typeof tempDir>;
  let store: AgentStore;
  let hal: SimulatedHal;
  beforeEach(() => {
    vi.useFakeTimers({ now: START, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    tmp = tempDir();
    store = openAgentStore(tmp.dir);
    hal = createSimulatedHal({
      connectors: 1,
      seed: 2,
      vehicles: 'manual',
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
    });
  });
  afterEach(() => {
    store.close();
    tmp.remove();
    vi.useRealTimers();
  });

  const sampler = (uplink: Uplink) =>
    createSampler({
      store,
      hal,
      clock: systemClock,
      logger: quietLogger(),
      uplink,
      connectors: () => connectors,
    });

  it('sends every 5 s while charging, every 60 s while idle, and at once on a change', async () => {
    const { uplink, sent } = recordingUplink();
    const s = sampler(uplink);
    s.start();
    await vi.advanceTimersByTimeAsync(120_000 - 1);
    expect(sent).toHaveLength(2); // at start, then 60 s later
    hal.plugIn(1, ev);
    await hal.startCharging(1);
    await s.sample('state_changed');
    expect(sent.at(-1)?.[0]?.state).toBe('charging');
    const before = sent.length;
    for (let i = 0; i < 6; i++) {
      hal.tick(5_000);
      await vi.advanceTimersByTimeAsync(5_000);
    }
    expect(sent.length - before).toBe(6);
    expect(sent.at(-1)?.[0]).toMatchObject({
      state: 'charging',
      power: 11,
      energy_delivered: expect.any(Number),
    });
    await s.stop();
  });

  it('stamps a connector’s records strictly later than the one before, even within one millisecond', async () => {
    const { uplink, sent } = recordingUplink();
    const s = sampler(uplink);
    s.start();
    await vi.advanceTimersByTimeAsync(0);
    // The control loop starts charging right after the first sample, within the same millisecond (Date is
    // frozen here): the platform would take a second record with the same stamp for a duplicate.
    hal.plugIn(1, ev);
    await hal.startCharging(1);
    await s.sample('state_changed');
    expect(sent.flat().map((r) => [r.state, Date.parse(r.timestamp)])).toEqual([
      ['idle', START],
      ['charging', START + 1],
    ]);
    await s.stop();
  });

  it('opens a session when energy flows and closes it, with its record, when the vehicle leaves', async () => {
    const { uplink } = recordingUplink();
    const s = sampler(uplink);
    hal.plugIn(1, ev);
    await hal.startCharging(1);
    await s.sample('x');
    expect(store.openSessions()).toHaveLength(1);
    hal.tick(30 * 60_000);
    vi.setSystemTime(START + 30 * 60_000);
    await s.sample('x');
    hal.unplug(1);
    await s.vehicleLeft(1, Date.now());
    expect(store.openSessions()).toHaveLength(0);
    const [record] = store.outbox
      .peek(10, 'charging_record')
      .map((i) => i.payload as Record<string, unknown>);
    expect(record).toMatchObject({
      connector_id: 1,
      energy: 5.5,
      max_power: 11,
      meter_start: 0,
      meter_end: 5.5,
    });
  });

  it('after a restart, continues a session the hardware still runs and closes one it no longer does', async () => {
    const { uplink } = recordingUplink();
    const first = sampler(uplink);
    hal.plugIn(1, ev);
    await hal.startCharging(1);
    await first.sample('x');
    hal.tick(10 * 60_000);
    vi.setSystemTime(START + 10 * 60_000);
    await first.sample('x');
    first.persist(); // the once-a-minute write, then the agent dies

    // The agent restarts; the charger kept charging: the same session carries on.
    await sampler(uplink).init();
    expect(store.openSessions()).toHaveLength(1);

    // The charger itself rebooted too (its meter starts from 0): the stored session ends where it was last seen.
    hal = createSimulatedHal({ connectors: 1, seed: 2, vehicles: 'manual' });
    hal.plugIn(1, ev);
    await sampler(uplink).init();
    expect(store.openSessions()).toHaveLength(0);
    const [record] = store.outbox
      .peek(10, 'charging_record')
      .map((i) => i.payload as Record<string, unknown>);
    expect(record).toMatchObject({ energy: 1.833, end_time: new Date(START + 10 * 60_000).toISOString() });
  });
});

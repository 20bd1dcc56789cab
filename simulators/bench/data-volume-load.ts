import { performance } from 'node:perf_hooks';
import {
  CHARGING_RECORDS_BATCH_MAX,
  type ChargingRecordUpload,
  envelopeOf,
  RATE_LIMITS,
  TELEMETRY_BATCH_MAX,
  TelemetryBatchAccepted,
  type TelemetryRecord,
  UploadAccepted,
} from '../../shared/index.js';
import {
  createSeededRandom,
  exponentialDelay,
  pickOne,
  type RandomSource,
  uniformBetween,
} from '../seeded-random.js';
import { type Charger, expectOk, type Http, inPool, sendWithin, throttle } from './data-volume-http.js';

/**
 * The data-volume benchmark's synthetic history, uploaded through the charger API within each charger's rate
 * limits: 5-s telemetry of two-connector chargers (charging sessions between idle periods) and a year of
 * charging records.
 */
export const STEP_MS = 5_000;
/** A charger's batches a little over 100 ms apart: its 10/s realtime budget (a batch counts as telemetry). */
export const TELEMETRY_GAP_MS = 1000 / RATE_LIMITS.deviceRealtime.limit + 10;
const HOUR = 3_600_000;
const BATTERY_KWH = 60;
const KW_LEVELS = [3.7, 7.4, 11, 22] as const;
const r2 = (x: number) => Math.round(x * 100) / 100;
const r3 = (x: number) => Math.round(x * 1000) / 1000;

/**
 * One connector sampled every 5 s: idle periods (10 min plus an exponential wait, mean 3 h) and sessions of
 * 0.5-5 h at 3.7-22 kW, ramping up over a minute and tapering above 80 % SOC until the target SOC.
 */
function simulatedConnector(random: RandomSource, connectorId: number): (t: number) => TelemetryRecord {
  let charging = false;
  let phaseEndMs: number | undefined;
  let sessionStartMs = 0;
  let maxKw = 0;
  let soc = 0;
  let targetSoc = 0;
  let kwh = 0;
  return (t) => {
    phaseEndMs ??= t + random() * 3 * HOUR;
    if (t >= phaseEndMs || (charging && soc >= targetSoc)) {
      charging = !charging;
      if (charging) {
        sessionStartMs = t;
        maxKw = pickOne(random, KW_LEVELS);
        soc = uniformBetween(random, 10, 60);
        targetSoc = uniformBetween(random, 80, 100);
        kwh = 0;
        phaseEndMs = t + uniformBetween(random, 0.5, 5) * HOUR;
      } else phaseEndMs = t + 600_000 + exponentialDelay(random, 3 * HOUR);
    }
    const timestamp = new Date(t).toISOString();
    const voltage = r2(uniformBetween(random, 227, 233));
    if (!charging) {
      const temperature = r2(uniformBetween(random, 18, 22));
      return {
        timestamp,
        connector_id: connectorId,
        state: 'idle',
        voltage,
        current: 0,
        power: 0,
        energy_delivered: 0,
        temperature,
      };
    }
    const ramp = Math.min(1, 0.1 + (t - sessionStartMs) / 60_000);
    const taper = soc > 80 ? Math.max(0.2, (100 - soc) / 20) : 1;
    const power = r2(maxKw * ramp * taper * uniformBetween(random, 0.96, 1));
    kwh += (power * STEP_MS) / HOUR;
    soc = Math.min(100, soc + (((power * STEP_MS) / HOUR) * 100) / BATTERY_KWH);
    return {
      timestamp,
      connector_id: connectorId,
      state: 'charging',
      voltage,
      current: r2((power * 1000) / (voltage * (maxKw > 7.4 ? 3 : 1))),
      power,
      energy_delivered: r3(kwh),
      soc: Math.floor(soc),
      temperature: r2(25 + power / 2 + random() * 2),
    };
  };
}

export interface UploadFigures {
  sent: number;
  accepted: number;
  duplicates: number;
  requests: number;
  /** 429s answered (each waited out and retried). */
  refused: number;
  seconds: number;
}

/** Logs progress to stderr every 15 s while `work` runs. */
async function withProgress<T>(
  label: string,
  total: number,
  done: () => number,
  work: Promise<T>,
): Promise<T> {
  const t0 = performance.now();
  const timer = setInterval(() => {
    const s = (performance.now() - t0) / 1000;
    process.stderr.write(`${label}: ${done()} of ${total} (${Math.round(done() / s)}/s)\n`);
  }, 15_000);
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}

/** Every charger uploads `steps` 5-s samples of both connectors from `startMs` in 500-record batches, all at once. */
export async function uploadTelemetry(
  http: Http,
  chargers: readonly Charger[],
  startMs: number,
  steps: number,
  seed: number,
): Promise<UploadFigures> {
  const f: UploadFigures = { sent: 0, accepted: 0, duplicates: 0, requests: 0, refused: 0, seconds: 0 };
  const schema = envelopeOf(TelemetryBatchAccepted);
  const t0 = performance.now();
  const perBatch = TELEMETRY_BATCH_MAX / 2;
  const upload = async (c: Charger, k: number) => {
    const budget = throttle(TELEMETRY_GAP_MS);
    const connectors = [1, 2].map((id) => simulatedConnector(createSeededRandom(seed + k * 2 + id), id));
    for (let i = 0; i < steps; i += perBatch) {
      const records: TelemetryRecord[] = [];
      for (let j = i; j < Math.min(steps, i + perBatch); j++)
        for (const sample of connectors) records.push(sample(startMs + j * STEP_MS));
      const body = JSON.stringify({ records });
      const answer = await sendWithin(budget, http, 'POST', '/v1/device/telemetry/batch', {
        token: c.token,
        body,
      });
      const data = expectOk('telemetry batch', answer, schema).data;
      f.sent += records.length;
      f.accepted += data.accepted;
      f.duplicates += data.duplicates;
      f.requests++;
    }
    f.refused += budget.refused;
  };
  const total = chargers.length * steps * 2;
  await withProgress('telemetry rows', total, () => f.sent, Promise.all(chargers.map(upload)));
  f.seconds = (performance.now() - t0) / 1000;
  return f;
}

/** Records of one charger, `count` over [fromMs, toMs): one session per equal slot, meter readings rising. */
function chargerRecords(random: RandomSource, index: number, count: number, fromMs: number, toMs: number) {
  const slot = (toMs - fromMs) / count;
  let j = 0;
  let meter = uniformBetween(random, 100, 5000);
  return (n: number): ChargingRecordUpload[] => {
    const out: ChargingRecordUpload[] = [];
    for (; out.length < n && j < count; j++) {
      const start = Math.floor((fromMs + j * slot + random() * slot * 0.3) / 1000) * 1000;
      const duration = Math.floor(Math.min(slot * 0.6, uniformBetween(random, 0.25, 4) * HOUR) / 1000) * 1000;
      const maxKw = pickOne(random, KW_LEVELS);
      const avg = r2(maxKw * uniformBetween(random, 0.6, 0.95));
      const energy = r3((avg * duration) / HOUR);
      const socStart = Math.floor(uniformBetween(random, 5, 60));
      out.push({
        record_id: `cr-${index}-${j}`,
        connector_id: 1 + Math.floor(random() * 2),
        start_time: new Date(start).toISOString(),
        end_time: new Date(start + duration).toISOString(),
        energy,
        max_power: maxKw,
        avg_power: avg,
        meter_start: r3(meter),
        meter_end: r3(meter + energy),
        vehicle_info: {
          soc_start: socStart,
          soc_end: Math.min(100, socStart + Math.ceil((energy / BATTERY_KWH) * 100)),
        },
      });
      meter += energy;
    }
    return out;
  };
}

/** Records per charger when `total` are spread over `chargers`: the first ones take the remainder. */
export const recordsOfCharger = (total: number, chargers: number, index: number) =>
  Math.floor(total / chargers) + (index < total % chargers ? 1 : 0);

/**
 * `total` records over [fromMs, toMs) spread over the chargers, 100 per request, `concurrency` requests at a
 * time. Requests go round by round (every charger's first batch, then every second one), so that one
 * charger's requests are far apart (the 60/min reporting budget is per charger).
 */
export async function uploadRecords(
  http: Http,
  chargers: readonly Charger[],
  total: number,
  fromMs: number,
  toMs: number,
  seed: number,
  concurrency: number,
): Promise<UploadFigures> {
  const f: UploadFigures = { sent: 0, accepted: 0, duplicates: 0, requests: 0, refused: 0, seconds: 0 };
  const schema = envelopeOf(UploadAccepted);
  const gapMs = (RATE_LIMITS.deviceReporting.windowSeconds * 1000) / RATE_LIMITS.deviceReporting.limit + 50;
  const state = chargers.map((c, i) => ({
    charger: c,
    next: chargerRecords(
      createSeededRandom(seed + i),
      i,
      recordsOfCharger(total, chargers.length, i),
      fromMs,
      toMs,
    ),
    budget: throttle(gapMs),
  }));
  const rounds = Math.ceil(recordsOfCharger(total, chargers.length, 0) / CHARGING_RECORDS_BATCH_MAX);
  const jobs = [];
  for (let r = 0; r < rounds; r++)
    for (let i = 0; i < chargers.length; i++)
      if (recordsOfCharger(total, chargers.length, i) > r * CHARGING_RECORDS_BATCH_MAX) jobs.push(state[i]!);
  const t0 = performance.now();
  const work = inPool(jobs, concurrency, async (s) => {
    // Made when its turn comes: one charger's batches are taken in order.
    const records = s.next(CHARGING_RECORDS_BATCH_MAX);
    const body = JSON.stringify({ records });
    const answer = await sendWithin(s.budget, http, 'POST', '/v1/device/charging-records', {
      token: s.charger.token,
      body,
    });
    const data = expectOk('charging records', answer, schema).data;
    f.sent += records.length;
    f.accepted += data.accepted;
    f.duplicates += data.duplicates;
    f.requests++;
  });
  await withProgress('charging records', total, () => f.sent, work);
  f.refused = state.reduce((n, s) => n + s.budget.refused, 0);
  f.seconds = (performance.now() - t0) / 1000;
  return f;
}

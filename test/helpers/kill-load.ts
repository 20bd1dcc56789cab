import { sleep } from './cli.js';
import type { Charger } from './fault-chargers.js';
import {
  evKey,
  FINAL,
  type Ledger,
  noteHeartbeat,
  payloadsOf,
  type RoundStats,
  recKey,
  telKey,
} from './kill-ledger.js';
import { afterRestart } from './kill-replay.js';
import type { HttpClient, HttpResult } from './platform.js';

/**
 * The concurrent load of the SIGKILL rounds of platform-faults.test.ts — per charger a realtime worker
 * (telemetry, batches, heartbeats) and a reporting worker (command status reports, events, charging records),
 * and an operator stopping connectors — writing every acknowledged write into the ledger; and the checks after
 * each restart (redelivered commands, idempotent replays). Its choices come from the test's seeded `rng`.
 */

export interface KillLoad {
  /** Assertions inside the load workers, whose catch blocks swallow connection errors from the kill. */
  anomalies: string[];
  /** Requests sent and not answered yet, across all workers. */
  readonly inflight: number;
  /**
   * One load round: concurrent workers (per charger a realtime and a reporting one, and an operator) until
   * `stop.now`, writing every acknowledged write into the ledger.
   */
  load(h: HttpClient, stop: { now: boolean }, round: RoundStats): Promise<unknown>;
  /**
   * After a restart: pending commands come back (at least once) but never one acknowledged as final, and
   * replaying uploads is idempotent — acknowledged ones count as duplicates, unanswered ones land once.
   */
  afterRestart(h: HttpClient, round: RoundStats): Promise<void>;
}

/** What the workers share. */
interface LoadState {
  chargers: Charger[];
  opToken: string;
  ledger: Ledger;
  rng: () => number;
  pick: <T>(xs: readonly T[]) => T;
  /** Commands each charger has received and the status it will report next. */
  received: Map<string, Map<string, string>>;
  anomalies: string[];
  check: (cond: boolean, what: string) => void;
  inflight: number;
  payloads: ReturnType<typeof payloadsOf>;
}

/** A worker's round: its requests (counted in flight), the success check, the stop flag, the round's counts. */
interface Round {
  post: (path: string, opts: Parameters<HttpClient['post']>[1]) => Promise<HttpResult>;
  ok: (res: HttpResult) => boolean;
  stop: { now: boolean };
  round: RoundStats;
}

export function killLoad(chargers: Charger[], opToken: string, ledger: Ledger, rng: () => number): KillLoad {
  const anomalies: string[] = [];
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;
  const st: LoadState = {
    chargers,
    opToken,
    ledger,
    rng,
    pick,
    received: new Map<string, Map<string, string>>(chargers.map((c) => [c.deviceId, new Map()])),
    anomalies,
    check: (cond, what) => {
      if (!cond) anomalies.push(what);
    },
    inflight: 0,
    payloads: payloadsOf(rng, pick),
  };
  return {
    anomalies,
    get inflight() {
      return st.inflight;
    },
    load: (h, stop, round) => load(st, h, stop, round),
    afterRestart: (h, round) => afterRestart(st, h, round),
  };
}

function load(st: LoadState, h: HttpClient, stop: { now: boolean }, round: RoundStats) {
  const { anomalies, chargers } = st;
  const post = async (path: string, opts: Parameters<HttpClient['post']>[1]) => {
    st.inflight++;
    try {
      return await h.post(path, opts);
    } finally {
      st.inflight--;
    }
  };
  /** A success envelope. A 2xx without one, or a 5xx, is recorded and fails the round. */
  const ok = (res: HttpResult) => {
    if (res.status >= 500 || (res.status === 200 && res.body?.code !== 0))
      anomalies.push(`${res.status} ${res.text}`);
    return res.status === 200 && res.body?.code === 0;
  };
  const w: Round = { post, ok, stop, round };
  return Promise.all([
    ...chargers.map((c) => realtime(st, w, c)),
    ...chargers.map((c) => reporting(st, w, c)),
    operator(st, w),
  ]);
}

// Realtime traffic (10/s per charger): telemetry, batches and heartbeats.
async function realtime(st: LoadState, { post, ok, stop, round }: Round, c: Charger) {
  const { ledger, rng, check } = st;
  const { telemetryOf, telemetryBody } = st.payloads;
  for (let i = 0; !stop.now; i++) {
    try {
      if (i % 3 === 2) {
        const res = await post('/v1/device/heartbeat', {
          token: c.token,
          json: { timestamp: new Date().toISOString(), status: 'online', fault_code: 0 },
        });
        if (ok(res)) {
          noteHeartbeat(st, c, res);
          round.heartbeats++;
        }
      } else if (rng() < 0.4) {
        const batch = Array.from({ length: 50 + Math.floor(rng() * 350) }, () => telemetryOf(c));
        try {
          const res = await post('/v1/device/telemetry/batch', {
            token: c.token,
            json: { records: batch.map(telemetryBody) },
          });
          if (ok(res)) {
            check(res.body.data.accepted === batch.length, `batch answered ${res.text}`);
            for (const t of batch) ledger.telemetry.set(telKey(t), t);
            round.telemetry += batch.length;
          } else if (res.status >= 500) ledger.unansweredTelemetry.push(...batch);
        } catch (err) {
          ledger.unansweredTelemetry.push(...batch);
          throw err;
        }
      } else {
        const t = telemetryOf(c);
        try {
          const res = await post('/v1/device/telemetry', { token: c.token, json: telemetryBody(t) });
          if (ok(res)) {
            ledger.telemetry.set(telKey(t), t);
            round.telemetry++;
          }
        } catch (err) {
          ledger.unansweredTelemetry.push(t);
          throw err;
        }
      }
    } catch {
      // The platform was killed under this request: no answer, no acknowledgement.
    }
    await sleep(100);
  }
}

// Reporting traffic (60/min per charger): command status reports, events, charging records.
async function reporting(st: LoadState, { post, ok, stop, round }: Round, c: Charger) {
  const { ledger, rng, pick, check, received } = st;
  const { recordOf, recordBody, eventOf, eventBody } = st.payloads;
  const mine = received.get(c.deviceId)!;
  while (!stop.now) {
    try {
      const open = [...mine].filter(([, s]) => !FINAL.has(s));
      if (open.length > 0 && rng() < 0.5) {
        const [id, current] = pick(open);
        const next =
          current === 'delivered'
            ? rng() < 0.9
              ? 'accepted'
              : 'rejected'
            : rng() < 0.85
              ? 'succeeded'
              : 'failed';
        try {
          const res = await post(`/v1/device/commands/${id}/status`, {
            token: c.token,
            json: { status: next },
          });
          if (ok(res)) {
            // The answer is the command's status. It differs from this report only when an earlier report
            // on it went unanswered (the kill) yet was stored: then this one is a no-op (`changed: false`,
            // docs/api.md) and the stored status is what the platform acknowledges.
            const answered = res.body.data.status as string;
            check(
              answered === next || (ledger.unansweredReports.has(id) && res.body.data.changed === false),
              `report ${next} on ${id} answered ${res.text}`,
            );
            ledger.ackCommand(id, c.deviceId, answered);
            mine.set(id, answered);
            round.reports++;
          }
        } catch (err) {
          ledger.unansweredReports.add(id);
          throw err;
        }
      } else if (rng() < 0.5) {
        const evs = Array.from({ length: 1 + Math.floor(rng() * 20) }, () => eventOf(c));
        try {
          const res = await post('/v1/device/events', {
            token: c.token,
            json: { events: evs.map(eventBody) },
          });
          if (ok(res)) {
            check(res.body.data.accepted === evs.length, `events answered ${res.text}`);
            for (const e of evs) ledger.events.set(evKey(e), e);
            round.events += evs.length;
          }
        } catch (err) {
          ledger.unansweredEvents.push(...evs);
          throw err;
        }
      } else {
        const recs = Array.from({ length: 1 + Math.floor(rng() * 20) }, () => recordOf(c));
        try {
          const res = await post('/v1/device/charging-records', {
            token: c.token,
            json: { records: recs.map(recordBody) },
          });
          if (ok(res)) {
            check(res.body.data.accepted === recs.length, `records answered ${res.text}`);
            for (const r of recs) ledger.records.set(recKey(r), r);
            round.records += recs.length;
          }
        } catch (err) {
          ledger.unansweredRecords.push(...recs);
          throw err;
        }
      }
    } catch {
      // Killed under this request.
    }
    await sleep(15);
  }
}

// The operator stops connectors (60/min per client).
async function operator(st: LoadState, { post, ok, stop, round }: Round) {
  const { ledger, rng, pick, check, chargers, opToken } = st;
  while (!stop.now) {
    const c = pick(chargers);
    try {
      const res = await post(
        `/v1/operator/devices/${c.deviceId}/connectors/${1 + (rng() < 0.5 ? 1 : 0)}/stop`,
        {
          token: opToken,
          json: { reason: 'fault test' },
        },
      );
      if (ok(res)) {
        check(res.body.data.status === 'queued', `stop answered ${res.text}`);
        ledger.ackCommand(res.body.data.command_id, c.deviceId, 'queued');
        round.commands++;
      }
    } catch {
      // Killed under this request.
    }
    await sleep(15);
  }
}

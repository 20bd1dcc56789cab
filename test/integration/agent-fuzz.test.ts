import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentRuntime, startAgent } from '../../agent/runtime/agent-runtime.js';
import { ensureSelfSignedCertificate } from '../../platform/http/tls.js';
import { createSimulatedHal, type SimulatedHal } from '../../simulators/simulated-hal.js';
import { quietLogger, sleep, startTcpProxy, type TcpProxy, tempDir, waitFor } from '../helpers/agent.js';
import {
  boundOf,
  integrity,
  type Json,
  onUnhandled,
  SEED,
  TUNING,
  unhandled,
} from '../helpers/agent-fuzz.js';
import { fuzzedAgentViews } from '../helpers/agent-fuzz-views.js';
import { answerFor } from '../helpers/garbage-answers.js';
import { type GarbageServer, startGarbageServer } from '../helpers/garbage-server.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The agent against a platform that talks nonsense (issue 6, item 1, agent side). Property-based, fast-check with
 * one fixed seed (`AGENT_FUZZ_SEED=n` explores others), bounded runs; a real agent (`startAgent`, in process,
 * simulated HAL, real clock, short cadences) over real HTTPS.
 *
 * Garbage answers. A node:https server stands in for the platform (same certificate as the real test
 * platform, so the agent's CA trusts both) behind a TCP proxy the agent always talks to. Each run it answers
 * every request from a generated script: wrong JSON shapes, fields missing or of the wrong type, success
 * envelopes with error codes and error envelopes with codes that do not belong to their status, non-JSON,
 * invalid UTF-8, truncated bodies (short, or shorter than their Content-Length), bodies of several MiB, wrong
 * content types, 2xx/3xx/4xx/5xx statuses, slow, hanging and trickling answers, connection resets. The real
 * platform's pending commands are slipped into some heartbeat/poll answers so that command statuses pile
 * up in the outbox too. Then the proxy is switched to the real platform — the same running agent, or a new
 * one on the same data directory after a shutdown under garbage — and it must deliver its whole backlog.
 * Properties: no crash (no unhandled rejection or exception in the process), no fatal, no request held
 * longer than its timeout, `PRAGMA integrity_check` = ok, nothing taken out of the outbox during the garbage
 * (nothing was validly accepted, so nothing counts as delivered or refused, and every closed session's
 * record and every command status is still queued), and afterwards the platform's charging records are
 * exactly the agent's closed sessions and its command states exactly the agent's journal.
 *
 * Excluded from the script, because they are the platform's word rather than garbage: a valid success
 * answer to an upload or a registration, and a well-formed documented refusal (a DESIGN.md §4 code with
 * one of its statuses) to an upload or a registration — the agent drops what the platform refuses for good
 * (uplink.ts) and gives up on an identity it refuses (exit 3); both are tested elsewhere. A documented 401
 * and a 429 are kept (renewal, backoff), with small retry-after values: the agent honours a server's wait
 * without a cap by design (backoff.ts). The token endpoint gets everything, documented refusals included
 * (a fixed example runs first: uploads answered 401/2001, the token endpoint 403/2003).
 *
 * Defects this found, fixed in agent/link/platform-client.ts (unit regressions in
 * platform-client-regressions.test.ts): a proxy's 3xx/4xx page was taken as the platform's permanent refusal
 * and made the uplink drop records; a token exchange refused for good made it drop the upload that needed the
 * token; an answer trickling in held a request (and the flusher) past its timeout for as long as it trickled;
 * a command with a usable id but a non-string name or expiry was never answered (the platform redelivers it
 * until it expires).
 *
 * Malformed commands from a well-behaved fake platform are in agent-fuzz-commands.test.ts. The garbage answers
 * are generated in test/helpers/garbage-answers.ts and served by garbage-server.ts.
 */

const RUNS_A = 5;
const GARBAGE_MS = 3_000;

describe('agent against garbage platform answers', () => {
  let tp: TestPlatform;
  let tenant: Awaited<ReturnType<typeof createTenant>>;
  let tlsDir: ReturnType<typeof tempDir>;
  let dataDir: ReturnType<typeof tempDir>;
  let garbage: GarbageServer;
  let proxy: TcpProxy;
  let agent: AgentRuntime | undefined;
  let deviceId: string;
  let halSeed = 100;
  const SN = `FUZZ-AGENT-A-${process.pid}`;
  const commandIds: string[] = [];
  const fatals: string[] = [];

  async function start(): Promise<AgentRuntime> {
    const hal: SimulatedHal = createSimulatedHal({
      connectors: 2,
      seed: halSeed++,
      vehicles: 'random',
      initialOccupancy: 1,
      dwellMs: [1_200, 2_500],
      meanVacancyMs: 300,
      meanTimeBetweenFaultsMs: Number.POSITIVE_INFINITY,
      tickIntervalMs: 200,
    });
    const runtime = await startAgent({
      config: { dataDir: dataDir.dir, platformUrl: `https://127.0.0.1:${proxy.port}`, sn: SN, ca: tp.ca },
      hal,
      logger: quietLogger(),
      tuning: TUNING,
    });
    void runtime.fatal.then((e) => fatals.push(e.message));
    return runtime;
  }

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    process.on('uncaughtException', onUnhandled);
    // The garbage server's certificate first; the real platform then finds and serves the same one.
    tlsDir = tempDir('agent-fuzz-tls-');
    const tls = await ensureSelfSignedCertificate(tlsDir.dir);
    tp = await startTestPlatform({ dataDir: tlsDir.dir });
    expect(tp.ca).toBe(tls.cert);
    tenant = await createTenant(tp, 'agent-fuzz');
    garbage = await startGarbageServer(tls);
    proxy = await startTcpProxy(tp.port);
    dataDir = tempDir('agent-fuzz-a-');
    agent = await start();
    deviceId = (await agent.registered)!.deviceId;
    await tp.store.assignDevice(deviceId, tenant.siteId);
  });

  afterAll(async () => {
    await agent?.stop().catch(() => undefined);
    await proxy?.close();
    await garbage?.close();
    await tp?.stop();
    tlsDir?.remove();
    dataDir?.remove();
    process.off('unhandledRejection', onUnhandled);
    process.off('uncaughtException', onUnhandled);
  });
  const { platformRecordIds, agentView, converged, queueCommands } = fuzzedAgentViews(() => ({
    tp,
    tenant,
    deviceId,
    dataDir: dataDir.dir,
    commandIds,
  }));

  it('survives generated garbage on every endpoint, keeps its outbox, then delivers it to the real platform', async () => {
    const script = fc.record({
      register: fc.array(answerFor('register'), { minLength: 5, maxLength: 12 }),
      token: fc.array(answerFor('token'), { minLength: 5, maxLength: 12 }),
      commands: fc.array(answerFor('commands'), { minLength: 15, maxLength: 30 }),
      upload: fc.array(answerFor('upload'), { minLength: 20, maxLength: 40 }),
      recover: fc.constantFrom('switch' as const, 'restart' as const),
    });
    let run = 0;
    const figures: string[] = [];
    await fc.assert(
      fc.asyncProperty(script, async ({ recover, ...answers }) => {
        run += 1;
        garbage.setScript(answers);
        // The link now leads to the garbage server; the real platform queues commands the agent cannot fetch.
        proxy.setTarget(garbage.port);
        proxy.cut();
        const mine = await queueCommands(run);
        commandIds.push(...mine);
        garbage.setCommands(async () => {
          const wire: Json[] = [];
          for (const id of mine) {
            const c = (await tp.store.getCommand(id))?.command;
            if (c)
              wire.push({
                command_id: c.command_id,
                command: c.command,
                params: c.params,
                expiry: new Date(c.expiry_ms).toISOString(),
              });
          }
          return wire;
        });
        await sleep(100);
        const before = agent!.stats().uplink;
        const servedBefore = garbage.served.length;
        await sleep(GARBAGE_MS);

        // Nothing was validly accepted: nothing delivered, nothing refused, everything still queued.
        let view = agentView();
        const during = agent!.stats().uplink;
        for (const kind of ['telemetry', 'event', 'charging_record', 'command_status'] as const) {
          expect(during.delivered[kind] - before.delivered[kind], `${kind} delivered to garbage`).toBe(0);
          expect(during.refused[kind] - before.refused[kind], `${kind} dropped on garbage`).toBe(0);
        }
        expect(integrity(dataDir.dir)).toBe('ok');
        if (recover === 'restart') {
          // A shutdown with nothing but garbage on the line: bounded, and the store is whole after it.
          const stopping = Date.now();
          await agent!.stop();
          expect(Date.now() - stopping, 'shutdown under garbage').toBeLessThan(12_000);
          agent = undefined;
          expect(integrity(dataDir.dir)).toBe('ok');
          view = agentView();
        }
        const onPlatform = new Set(await platformRecordIds());
        const queued = new Set(view.queuedRecords);
        const notDelivered = view.closed.filter((id) => !onPlatform.has(id));
        expect(
          notDelivered.filter((id) => !queued.has(id)),
          'closed sessions neither delivered nor queued',
        ).toEqual([]);
        for (const id of mine) {
          const status = view.journal.get(id);
          const reports = view.queuedStatuses.filter((s) => s.command_id === id).map((s) => s.status);
          const expected =
            status === undefined || status === 'received'
              ? []
              : status === 'rejected'
                ? ['rejected']
                : status === 'accepted'
                  ? ['accepted']
                  : ['accepted', status];
          expect(reports, `queued reports of ${id} (journal: ${status})`).toEqual(expected);
        }
        // No request was held longer than its timeout (a trickle, a hang, a slow answer included): the ones
        // still open get their full bound before the line is switched.
        const phase = garbage.served.slice(servedBefore);
        await waitFor(
          () => phase.filter((r) => r.endedAt === undefined && Date.now() - r.startedAt <= boundOf(r.path)),
          (open) => open.length === 0,
          5_000,
          50,
        );
        const now = Date.now();
        const held = phase
          .filter((r) => (r.endedAt ?? now) - r.startedAt > boundOf(r.path))
          .map((r) => `${r.kind} ${r.path} ${(r.endedAt ?? now) - r.startedAt} ms`);
        expect(held, 'requests held beyond their timeout').toEqual([]);

        // Back to the real platform: the same agent recovers (or a new one on the same store), and delivers.
        tp.advance(61_000); // fresh rate-limit windows for the backlog
        proxy.setTarget(tp.port);
        proxy.cut();
        if (!agent) agent = await start();
        const why = await waitFor(converged, (v) => v === undefined, 15_000, 100);
        expect(why, `after run ${run} (${recover})`).toBeUndefined();
        expect(agent.stats().registered).toBe(true);
        figures.push(
          `run ${run} ${recover}: ${garbage.served.length - servedBefore} garbage answers, ` +
            `${notDelivered.length} records and ${view.queuedStatuses.length} statuses held back, then delivered`,
        );
        expect(fatals).toEqual([]);
        expect(unhandled).toEqual([]);
      }),
      {
        seed: SEED,
        numRuns: RUNS_A,
        endOnFailure: true,
        examples: [
          // Every upload answered 401/2001 (renew the token), and the token endpoint answering with a
          // documented refusal of its own: that refuses the token, not what the upload carried.
          [
            {
              register: [{ t: 'json', status: 503, type: null, body: null }],
              token: [
                {
                  t: 'json',
                  status: 403,
                  type: 'application/json',
                  body: { code: 2003, message: 'Forbidden' },
                },
              ],
              commands: [{ t: 'valid', expiresIn: 86_400 }],
              upload: [
                {
                  t: 'json',
                  status: 401,
                  type: 'application/json',
                  body: { code: 2001, message: 'Unauthorized' },
                },
              ],
              recover: 'switch',
            },
          ],
        ],
      },
    );
    const kinds = new Map<string, number>();
    for (const s of garbage.served) kinds.set(s.kind, (kinds.get(s.kind) ?? 0) + 1);
    console.info(
      `agent-fuzz (a): ${figures.join('; ')}; answers by kind ${JSON.stringify(Object.fromEntries(kinds))}`,
    );

    // A clean stop at the end: the store is whole and the platform still matches it.
    await agent!.stop();
    agent = undefined;
    expect(fatals).toEqual([]);
    expect(integrity(dataDir.dir)).toBe('ok');
    expect(await converged()).toBeUndefined();
    expect(garbage.served.length).toBeGreaterThan(80);
    expect(unhandled).toEqual([]);
  }, 90_000);
});

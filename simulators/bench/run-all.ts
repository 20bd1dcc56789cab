#!/usr/bin/env node
import '../supported-node.js';
import { writeFile } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { measureAgentFootprint } from './agent-footprint.js';
import { benchArgsOrExit } from './bench-args.js';
import { measureCommandLatency, searchFleet } from './fleet-bench.js';
import { measureIngest } from './ingest.js';
import { measureLongPollAndStreamLatency } from './latency.js';
import { measureStreamRate } from './stream-rate.js';

/**
 * `npm run bench`: every benchmark in turn, each beside its baseline or goal, printed and written to
 * docs/benchmarks.md with the exact command and the machine. Never part of `npm test`. Options: `--help`.
 */
const { values } = benchArgsOrExit({
  usage: `Usage: npm run bench [-- options]
  every benchmark in turn (about 40 minutes); figures printed and written to docs/benchmarks.md`,
  options: {
    'fleet-count': { default: 4000, integer: true, help: 'fleet search: first N tried' },
    'fleet-step': { default: 1000, integer: true, help: 'fleet search: step' },
    'fleet-runs': { default: 3, integer: true, help: 'fleet search: runs at most' },
    'fleet-minutes': { default: 5, help: 'fleet search: minutes per run' },
    // Two worker threads: smaller heaps, collected apart (docs/simulators.md, "Worker threads").
    'fleet-workers': { default: 2, integer: true, help: 'fleet search: worker threads' },
    'footprint-minutes': { default: 10, help: 'agent footprint: minutes' },
  },
});
const FLEET_COUNT = values['fleet-count'];
const FLEET_STEP = values['fleet-step'];
const FLEET_RUNS = values['fleet-runs'];
const FLEET_MINUTES = values['fleet-minutes'];
const FLEET_WORKERS = values['fleet-workers'];
const FOOTPRINT_MINUTES = values['footprint-minutes'];

const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, ${process.platform} ${process.arch}, Node ${process.version}`;
const sections: string[] = [];
const log = (name: string, figures: unknown) => {
  process.stdout.write(`\n== ${name}\n${JSON.stringify(figures, null, 2)}\n`);
};
const block = (figures: unknown) => `\`\`\`json\n${JSON.stringify(figures, null, 2)}\n\`\`\``;

const ingest = await measureIngest(2000, 64, 15, 5);
log('ingest', ingest);
sections.push(`## Ingest — goal: platform ≥ 60 % of a bare node:https server, every record stored

Command: \`npx node dist/simulators/bench/ingest.js --devices 2000 --connections 64 --seconds 15 --rounds 5\`

The load generator is autocannon (64 keep-alive connections, closed loop). The platform, the bare node:https
server and a bare Fastify server (one route, the same answer: the framework's own cost) are measured in five
rotating rounds of 3 s each, so that drift of the shared machine weighs on all alike; \`rps_by_round\` shows how
much it drifted.

Platform **${ingest.platform.rps} req/s** (p50 ${ingest.platform.p50_ms} ms, p99 ${ingest.platform.p99_ms} ms) against bare
node:https **${ingest.bare_https.rps} req/s** (p50 ${ingest.bare_https.p50_ms} ms, p99 ${ingest.bare_https.p99_ms} ms): ratio
**${ingest.ratio}** (${ingest.ratio >= 0.6 ? 'goal met' : 'goal missed'}); acknowledged ${ingest.acknowledged}, stored ${ingest.stored}.
Bare Fastify: ${ingest.bare_fastify.rps} req/s, ${ingest.fastify_ratio} of node:https; the platform does ${ingest.ratio_to_fastify}
of what Fastify alone does.
The generator is not the bottleneck: during the bare rounds the bare server used ${ingest.cpu_cores.bare_server} of a core
(node:https serves on one thread) and the generator ${ingest.cpu_cores.generator_against_bare}; during the platform rounds
the platform used ${ingest.cpu_cores.platform_server} cores and the generator ${ingest.cpu_cores.generator_against_platform}.

${block(ingest)}`);

const latency = await measureLongPollAndStreamLatency(200);
log('long poll and stream (low rate)', latency);
sections.push(`## Long-poll wake-up and stream latency at low rate

Command: \`npx node dist/simulators/bench/latency.js --samples 200\`

Long poll: operator stop sent → charger's waiting poll answered, p50 **${latency.long_poll_wakeup_ms.p50} ms**, p99
**${latency.long_poll_wakeup_ms.p99} ms**. Stream: telemetry POST sent → WebSocket message, p50 ${latency.stream_latency_ms.p50} ms,
p99 ${latency.stream_latency_ms.p99} ms.

${block(latency)}`);

const stream = await measureStreamRate();
log('stream at 2,000 messages per second', stream);
sections.push(`## Stream latency at 2,000 messages per second — goal: p99 < 50 ms

Command: \`npx node dist/simulators/bench/stream-rate.js --rate 2000 --seconds 20 --warmup 5\`

${stream.received} of ${stream.sent} messages received at ${stream.achieved_rate}/s (${stream.errors} POSTs refused). Over the
${stream.latency_ms.n} messages after the ${stream.warmup_seconds}-second warm-up: p50 **${stream.latency_ms.p50} ms**, p99
**${stream.latency_ms.p99} ms** (${stream.latency_ms.p99 < 50 ? 'goal met' : 'goal missed'}). The warm-up itself (the platform's JIT
and first requests at full rate): p50 ${stream.warmup_latency_ms.p50} ms, p99 ${stream.warmup_latency_ms.p99} ms.

${block(stream)}`);

const command = await measureCommandLatency(1000, 300);
log('command latency', command);
sections.push(`## Command latency with 1,000 chargers — goal: p99 < 250 ms

Command: \`npx node dist/simulators/bench/fleet-bench.js command --count 1000 --commands 300\`

Operator \`POST .../stop\` → the agent's \`succeeded\` acknowledged: p50 **${command.latency_ms.p50_ms} ms**, p99
**${command.latency_ms.p99_ms} ms** (${command.latency_ms.p99_ms < 250 ? 'goal met' : 'goal missed'}).

${block(command)}`);

const search = await searchFleet(FLEET_COUNT, FLEET_STEP, FLEET_MINUTES, FLEET_RUNS, FLEET_WORKERS);
log('fleet', search);
const trialRows = search.trials
  .map(
    (t) =>
      `| ${t.count} | ${t.sustained ? 'yes' : 'no'} | ${t.errors} | ${t.steady_latency_ms.p99_ms} | ${t.requests_per_s} | ${t.platform_rss_mib.end} | ${t.platform_cpu_cores} | ${t.simulator_rss_mib.peak} | ${t.simulator_cpu_cores} | ${t.memory_per_charger_kib} | ${t.simulator_event_loop_delay_ms.p99} | ${t.platform_event_loop_lag_ms?.p99 ?? '–'} |`,
  )
  .join('\n');
const largest = search.largest_sustained;
sections.push(`## Fleet — goal: N ≥ 10,000 chargers for ${FLEET_MINUTES} minutes, zero errors, p99 < 100 ms

Command: \`npx node dist/simulators/bench/fleet-bench.js search --count ${FLEET_COUNT} --step ${FLEET_STEP} --minutes ${FLEET_MINUTES} --runs ${FLEET_RUNS} --workers ${FLEET_WORKERS}\`
(platform and simulator on this one machine, the fleet in ${FLEET_WORKERS} worker thread(s); every connector charging: telemetry every 5 s, heartbeats every 30 s).

Largest N sustained: **${largest}**${search.first_missed ? ` (${search.first_missed} missed)` : ''} — ${largest >= 10_000 ? 'goal met' : 'goal missed'}.

| N | sustained | errors | steady p99 ms | req/s | platform RSS MiB | platform cores | simulator RSS MiB | simulator cores | KiB per charger | simulator loop p99 ms | platform loop p99 ms |
|---|---|---|---|---|---|---|---|---|---|---|---|
${trialRows}

${block(search)}`);

const footprint = await measureAgentFootprint(FOOTPRINT_MINUTES);
log('agent footprint', footprint);
sections.push(`## Agent footprint — goal: RSS at cadence ≤ bare Node + ${footprint.goal_over_bare_mib} MiB

Command: \`npm run build:agent && npx node dist/simulators/bench/agent-footprint.js --minutes ${FOOTPRINT_MINUTES}\`
(Node ${footprint.node}; the bundle started plainly and as its systemd unit starts it, beside a bare
\`node -e "setInterval(()=>{},1000)"\`, in the same run).

Mean RSS over bare Node: plain ${footprint.over_bare_mib.node_defaults} MiB, as the unit starts it
${footprint.over_bare_mib.as_unit} MiB, as the unit starts it with a daily schedule
${footprint.over_bare_mib.as_unit_with_schedule} MiB (${footprint.goal_met ? 'goal met' : 'goal missed'}); CPU
${footprint.agent_node_defaults.cpu_percent_of_one_core} % and ${footprint.agent_as_unit.cpu_percent_of_one_core} % of one core.

${block(footprint)}`);

const doc = `# Benchmarks

Written by \`npm run bench\` on ${new Date().toISOString()}.
Machine: ${machine}. Each figure is measured beside its baseline in the same run.
Command: \`${process.env.NODE_OPTIONS ? `NODE_OPTIONS=${process.env.NODE_OPTIONS} ` : ''}npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}\` (every benchmark below in turn).

${sections.join('\n\n')}
`;
await writeFile(fileURLToPath(new URL('../../../docs/benchmarks.md', import.meta.url)), doc);
process.stdout.write('\nwrote docs/benchmarks.md\n');

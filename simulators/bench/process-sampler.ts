import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/** RSS and CPU time of a process from /proc (Linux), for footprint benchmarks. */
const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcessSample {
  atMs: number;
  rssMiB: number;
  cpuSeconds: number;
}

export function sampleProcess(pid: number): ProcessSample {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  // Fields after the command name, which may contain spaces: utime and stime are the 12th and 13th.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { atMs: Date.now(), rssMiB: rssKiB / 1024, cpuSeconds: ticks / CLOCK_TICKS_PER_SECOND };
}

export function summarizeSamples(samples: readonly ProcessSample[]) {
  const first = samples[0]!;
  const last = samples[samples.length - 1]!;
  const r = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
  const rss = samples.map((s) => s.rssMiB);
  return {
    rss_start_mib: r(first.rssMiB),
    rss_end_mib: r(last.rssMiB),
    rss_max_mib: r(Math.max(...rss)),
    rss_mean_mib: r(rss.reduce((a, b) => a + b, 0) / rss.length),
    cpu_percent_of_one_core: r(
      (100 * (last.cpuSeconds - first.cpuSeconds)) / ((last.atMs - first.atMs) / 1000),
      3,
    ),
    window_seconds: Math.round((last.atMs - first.atMs) / 1000),
  };
}

/** The machine's CPU time from /proc/stat, in clock ticks: all of it, and what the hypervisor stole. */
export interface HostCpuTimes {
  total: number;
  steal: number;
}

export function sampleHostCpu(): HostCpuTimes {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user already)
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  return { total: ticks.reduce((a, b) => a + b, 0), steal: ticks[7] ?? 0 };
}

/**
 * Share of the machine's CPU time the hypervisor gave to someone else between two readings, %: on a shared
 * virtual machine, a benchmark's figures are only comparable between runs with similar steal.
 */
export function stealPercent(from: HostCpuTimes, to: HostCpuTimes): number {
  const total = to.total - from.total;
  return total > 0 ? Math.round((1000 * (to.steal - from.steal)) / total) / 10 : 0;
}

/** CPU seconds the machine has spent running anything (all cores together; idle, I/O wait and steal apart). */
export function hostBusySeconds(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return (user + nice + system + irq + softirq) / CLOCK_TICKS_PER_SECOND;
}

/**
 * From now on, the CPU cores used by the process `pid`, by this process and by everything else on the machine:
 * on a shared machine, `others` says whether a figure was measured beside someone else's work.
 */
export function startCpuMeter(pid: number) {
  const at = performance.now();
  const host = hostBusySeconds();
  const target = sampleProcess(pid).cpuSeconds;
  const self = process.cpuUsage();
  return () => {
    const seconds = (performance.now() - at) / 1000;
    const used = process.cpuUsage(self);
    const targetCores = (sampleProcess(pid).cpuSeconds - target) / seconds;
    const selfCores = (used.user + used.system) / 1e6 / seconds;
    const r = (x: number) => Math.round(x * 100) / 100;
    return {
      target: r(targetCores),
      self: r(selfCores),
      others: r(Math.max(0, (hostBusySeconds() - host) / seconds - targetCores - selfCores)),
    };
  };
}

import { readFileSync } from 'node:fs';

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

import { useEffect, useMemo, useState } from 'preact/hooks';
import type uPlot from 'uplot';
import type { Device } from '../../../shared/resources.js';
import { useApp, useNow } from '../app-context.js';
import type { TelemetryMessage } from '../fleet.js';
import { ErrorLine } from './bits.js';
import { TimeChart } from './time-chart.js';

interface Bucket {
  start_time: string;
  end_time: string;
  avg_power: number;
  samples: number;
}

const HOUR_S = 3600;

/**
 * The last hour's power of one charger, moving: 15-minute averages from the energy endpoint (all the history the
 * API keeps as series) and, since the page opened, every telemetry sample from the stream (the sum of the
 * connectors' latest power at each sample).
 */
export function DevicePowerChart({ device }: { device: Device }) {
  const { api, live } = useApp();
  const now = useNow(2000);
  const [buckets, setBuckets] = useState<Bucket[]>([]);
  const [error, setError] = useState<string | undefined>(undefined);
  const [samples, setSamples] = useState<Array<[number, number]>>([]);

  useEffect(() => {
    const end = new Date();
    const start = new Date(end.getTime() - HOUR_S * 1000);
    api
      .get<{ items: Bucket[] }>('/v1/operator/energy', {
        device_id: device.device_id,
        start_time: start.toISOString(),
        end_time: end.toISOString(),
        interval: '15m',
      })
      .then(
        (s) => setBuckets(s.items),
        (err: unknown) => setError(err instanceof Error ? err.message : String(err)),
      );
  }, [api, device.device_id]);

  useEffect(() => {
    const latest = new Map<number, number>();
    for (const c of device.connectors ?? []) latest.set(c.connector_id, c.power ?? 0);
    return live.onMessage((m) => {
      if (m.type !== 'telemetry' || m.device_id !== device.device_id) return;
      const t = m as TelemetryMessage;
      latest.set(t.connector_id, t.state === 'charging' || t.state === 'discharging' ? (t.power ?? 0) : 0);
      let sum = 0;
      for (const p of latest.values()) sum += p;
      const x = Date.parse(t.timestamp) / 1000;
      setSamples((prev) => {
        const cut = x - HOUR_S;
        const kept = prev.filter(([px]) => px >= cut && px !== x);
        return [...kept, [x, Math.round(sum * 100) / 100]];
      });
    });
  }, [live, device.device_id]);

  const nowS = Math.floor(now / 1000);
  const { data, series } = useMemo(() => chartData(buckets, samples), [buckets, samples]);
  return (
    <>
      <ErrorLine error={error} />
      <TimeChart
        label="Power over the last hour"
        series={series}
        data={data}
        xRange={[nowS - HOUR_S, nowS]}
        yLabel="kW"
      />
      <p class="muted small" data-live-samples={samples.length}>
        {samples.length} live samples since this page opened; earlier: 15-minute averages.
      </p>
    </>
  );
}

function chartData(buckets: readonly Bucket[], samples: ReadonlyArray<[number, number]>) {
  const avg = new Map<number, number>();
  for (const b of buckets) {
    if (b.samples === 0) continue;
    const mid = (Date.parse(b.start_time) + Date.parse(b.end_time)) / 2000;
    avg.set(mid, b.avg_power);
  }
  const live = new Map(samples);
  const xs = [...new Set([...avg.keys(), ...live.keys()])].sort((a, b) => a - b);
  const data: uPlot.AlignedData = [xs, xs.map((x) => avg.get(x) ?? null), xs.map((x) => live.get(x) ?? null)];
  const series: uPlot.Series[] = [
    { label: '15-min average, kW', stroke: '#8a8f98', width: 2, spanGaps: true, points: { show: true } },
    { label: 'Live, kW', stroke: '#0b6bcb', width: 2, spanGaps: true },
  ];
  return { data, series };
}

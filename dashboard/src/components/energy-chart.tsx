import { useMemo, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { useApp, useLoad } from '../app-context.js';
import { kwh } from '../format.js';
import { ErrorLine, Loading } from './bits.js';
import { TimeChart } from './time-chart.js';

interface Bucket {
  start_time: string;
  energy_imported: number;
  energy_exported: number;
}

/** Each interval with the span it shows: 96 quarter hours, a week of hours, a month of days. */
const RANGES = {
  '15m': { label: '15 minutes (last 24 h)', spanMs: 86_400_000 },
  '1h': { label: '1 hour (last 7 days)', spanMs: 7 * 86_400_000 },
  '1d': { label: '1 day (last 30 days)', spanMs: 30 * 86_400_000 },
} as const;
type Interval = keyof typeof RANGES;

/** A site's energy from the energy endpoint (15-minute rollups), as bars of kWh drawn and exported. */
export function EnergyChart({ siteId }: { siteId: string }) {
  const { api } = useApp();
  const [interval, setInterval] = useState<Interval>('15m');
  const series = useLoad(() => {
    const end = new Date();
    const start = new Date(end.getTime() - RANGES[interval].spanMs);
    return api.get<{ items: Bucket[] }>('/v1/operator/energy', {
      site_id: siteId,
      start_time: start.toISOString(),
      end_time: end.toISOString(),
      interval,
    });
  }, [siteId, interval]);
  const items = series.data?.items ?? [];
  const chart = useMemo(() => {
    const bars = uPlot.paths.bars?.({ size: [0.8, 40] });
    const data: uPlot.AlignedData = [
      items.map((b) => Date.parse(b.start_time) / 1000),
      items.map((b) => b.energy_imported),
      items.map((b) => -b.energy_exported),
    ];
    const s: uPlot.Series[] = [
      { label: 'Imported, kWh', stroke: '#0b6bcb', fill: 'rgba(11,107,203,0.5)', paths: bars },
      { label: 'Exported (V2G), kWh', stroke: '#b35c00', fill: 'rgba(179,92,0,0.5)', paths: bars },
    ];
    return { data, series: s };
  }, [items]);
  const total = items.reduce((sum, b) => sum + b.energy_imported, 0);
  const exported = items.reduce((sum, b) => sum + b.energy_exported, 0);
  return (
    <>
      <fieldset class="form-row plain" aria-label="Interval">
        {(Object.keys(RANGES) as Interval[]).map((i) => (
          <label key={i} class="inline">
            <input
              type="radio"
              name="interval"
              value={i}
              checked={interval === i}
              onChange={() => setInterval(i)}
            />{' '}
            {RANGES[i].label}
          </label>
        ))}
      </fieldset>
      <ErrorLine error={series.error} />
      {series.loading && !series.data ? <Loading what="energy" /> : null}
      {series.data ? (
        <>
          <TimeChart label={`Energy per ${interval}`} series={chart.series} data={chart.data} yLabel="kWh" />
          <p class="muted small" data-energy-total={total.toFixed(3)}>
            {kwh(total)} imported, {kwh(exported)} exported over the range shown.
          </p>
        </>
      ) : null}
    </>
  );
}

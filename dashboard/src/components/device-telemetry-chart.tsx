import { useMemo, useState } from 'preact/hooks';
import type uPlot from 'uplot';
import { useNow } from '../app-context.js';
import { dateTime } from '../format.js';
import {
  chartData,
  earlierEnd,
  laterEnd,
  MEASUREMENTS,
  type Measurement,
  WINDOWS,
  type WindowLength,
} from '../telemetry-history.js';
import { ErrorLine, Loading } from './bits.js';
import { useLiveWindow, usePastWindow } from './telemetry-windows.js';
import { TimeChart } from './time-chart.js';

const COLORS = ['#0b6bcb', '#b35c00', '#2e7d32', '#8e24aa', '#c62828', '#00838f'];
const RESOLUTION_WORDS = {
  raw: 'every sample',
  '1m': '1-minute averages',
  '15m': '15-minute averages',
} as const;

/**
 * What a charger's connectors reported (DESIGN.md §21), one line per connector of the chosen measurement: the
 * last hour at full resolution, moving with the stream, or an earlier window of 1 h to 7 d scrolled back to.
 */
export function DeviceTelemetryChart({ deviceId }: { deviceId: string }) {
  const now = useNow(2000);
  const [length, setLength] = useState<WindowLength>('1h');
  /** The shown window's end; null: now, and moving. */
  const [endMs, setEndMs] = useState<number | null>(null);
  const [measurement, setMeasurement] = useState<Measurement>('power');
  const current = useLiveWindow(deviceId, length);
  const past = usePastWindow(deviceId, length, endMs);
  const shown = past ?? current;
  const w = shown.window;
  const { unit } = MEASUREMENTS[measurement];

  const chart = useMemo(
    () => chartData(shown.items, measurement, w.resolution),
    [shown.items, measurement, w.resolution],
  );
  const series = useMemo<uPlot.Series[]>(
    () =>
      chart.connectors.map((c, i) => ({
        label: `Connector ${c}, ${unit}`,
        stroke: COLORS[i % COLORS.length],
        width: 1.5,
      })),
    [chart.connectors.join(','), unit],
  );
  const nowS = Math.floor(now / 1000);
  const xRange: [number, number] = past
    ? [w.startMs / 1000, w.endMs / 1000]
    : [nowS - WINDOWS[length].spanMs / 1000, nowS];
  const from = past ? w.startMs : now - WINDOWS[length].spanMs;
  const to = past ? w.endMs : now;

  return (
    <div
      data-telemetry-chart
      data-window={length}
      data-resolution={w.resolution}
      data-live={past ? 'false' : 'true'}
      data-window-start={new Date(from).toISOString()}
      data-window-end={new Date(to).toISOString()}
      data-loading={shown.loading ? 'true' : 'false'}
      data-measurement={measurement}
      data-series={chart.connectors.join(',')}
      data-points={chart.points}
      data-samples={shown.items.length}
      data-live-samples={current.liveSamples}
    >
      <div class="form-row">
        <label>
          Measurement
          <select value={measurement} onChange={(e) => setMeasurement(e.currentTarget.value as Measurement)}>
            {(Object.keys(MEASUREMENTS) as Measurement[]).map((m) => (
              <option key={m} value={m}>
                {MEASUREMENTS[m].label}, {MEASUREMENTS[m].unit}
              </option>
            ))}
          </select>
        </label>
        <label>
          Window
          <select value={length} onChange={(e) => setLength(e.currentTarget.value as WindowLength)}>
            {(Object.keys(WINDOWS) as WindowLength[]).map((l) => (
              <option key={l} value={l}>
                {WINDOWS[l].label} ({RESOLUTION_WORDS[WINDOWS[l].resolution]})
              </option>
            ))}
          </select>
        </label>
      </div>
      <fieldset class="plain action-buttons" aria-label="Scroll through history">
        <button
          type="button"
          class="secondary small"
          onClick={() => setEndMs(earlierEnd(length, endMs, Date.now()))}
        >
          ◀ earlier
        </button>
        <button
          type="button"
          class="secondary small"
          disabled={endMs === null}
          onClick={() => setEndMs(laterEnd(length, endMs, Date.now()))}
        >
          later ▶
        </button>
        <button
          type="button"
          class="secondary small"
          disabled={endMs === null}
          onClick={() => setEndMs(null)}
        >
          now
        </button>
        <span class="muted small" aria-live="polite">
          {dateTime(new Date(from).toISOString())} –{' '}
          {past ? dateTime(new Date(to).toISOString()) : 'now (live)'}
        </span>
      </fieldset>
      <ErrorLine error={shown.error} />
      {shown.error ? (
        <button type="button" class="secondary small" onClick={shown.reload}>
          Try again
        </button>
      ) : null}
      {shown.loading ? <Loading what="telemetry" /> : null}
      {!shown.loading && !shown.error && chart.points === 0 ? (
        <p class="muted" data-empty>
          {shown.items.length === 0
            ? `No telemetry from this charger in this window${past ? '' : ' yet'}.`
            : `No ${MEASUREMENTS[measurement].label.toLowerCase()} in this window: the charger did not send it.`}
        </p>
      ) : null}
      {chart.points > 0 ? (
        <TimeChart
          label={`${MEASUREMENTS[measurement].label} per connector`}
          series={series}
          data={chart.data}
          xRange={xRange}
          yLabel={unit}
        />
      ) : null}
      <p class="muted small">
        {chart.points} points ({RESOLUTION_WORDS[w.resolution]})
        {past ? '' : `; ${current.liveSamples} live samples added since this page opened`}
        {shown.complete ? '' : '; more than the page reads in one window: choose a longer one'}.
      </p>
    </div>
  );
}

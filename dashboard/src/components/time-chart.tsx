import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

/**
 * A uPlot chart that follows its container's width (phone or desktop) and takes new data without being rebuilt,
 * so a live chart moves without flicker. x values are Unix seconds.
 */
export interface TimeChartProps {
  label: string;
  series: uPlot.Series[];
  data: uPlot.AlignedData;
  height?: number;
  /** Fixed x range [min, max] in seconds (a moving window); otherwise fitted to the data. */
  xRange?: [number, number];
  yLabel?: string;
}

export function TimeChart({ label, series, data, height = 220, xRange, yLabel }: TimeChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | undefined>(undefined);
  const range = useRef(xRange);
  range.current = xRange;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 240),
      height,
      series: [{}, ...series],
      scales: {
        x: { time: true, range: (_u, min, max) => range.current ?? [min, max] },
      },
      axes: [{}, { label: yLabel, size: 60 }],
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    const u = new uPlot(opts, data, el);
    chart.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(el.clientWidth, 240), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      chart.current = undefined;
    };
  }, [series.map((s) => s.label).join('|'), height, yLabel]);

  useEffect(() => {
    chart.current?.setData(data, xRange === undefined);
    if (xRange) chart.current?.setScale('x', { min: xRange[0], max: xRange[1] });
  }, [data, xRange?.[0], xRange?.[1]]);

  return <figure class="chart" aria-label={label} ref={box} />;
}

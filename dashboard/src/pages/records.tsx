import { useState } from 'preact/hooks';
import type { ChargingRecord } from '../../../shared/resources.js';
import { type Api, ApiError, describeError } from '../api.js';
import { useApp, useFleet, useLoad } from '../app-context.js';
import { ErrorLine, Loading, Section } from '../components/bits.js';
import { Pager } from '../components/device-panels.js';
import { recordsToCsv } from '../csv.js';
import type { Page } from '../fleet-store.js';
import { dateTime, isoToLocalInput, kw, kwh, localInputToIso } from '../format.js';
import { href } from '../router.js';
import { saveFile } from '../save-file.js';

/** The spec's filters, as the URL carries them (`#/records?device_id=…`), so a filtered list can be shared. */
const FILTERS = ['device_id', 'connector_id', 'start_time', 'end_time'] as const;
const PAGE_SIZE = 20;
/** CSV export reads pages of 100; this many rows at most (the API allows 60 reads a minute per client). */
const EXPORT_MAX_ROWS = 5000;

export function RecordsPage({ query }: { query: URLSearchParams }) {
  const { api } = useApp();
  const fleet = useFleet();
  const filters = Object.fromEntries(FILTERS.map((k) => [k, query.get(k) ?? undefined]));
  const page = Number(query.get('page') ?? '1') || 1;
  const records = useLoad(
    () =>
      api.get<Page<ChargingRecord>>('/v1/operator/charging-records', { ...filters, page, size: PAGE_SIZE }),
    [query.toString()],
  );
  const pages = records.data ? Math.max(1, Math.ceil(records.data.total / records.data.size)) : 1;
  const go = (next: URLSearchParams) => {
    location.hash = href.records(next);
  };
  const submit = (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const next = new URLSearchParams();
    const device = String(f.get('device_id') ?? '');
    const connector = String(f.get('connector_id') ?? '').trim();
    const start = String(f.get('start_time') ?? '');
    const end = String(f.get('end_time') ?? '');
    if (device) next.set('device_id', device);
    if (connector) next.set('connector_id', connector);
    const startIso = localInputToIso(start);
    const endIso = localInputToIso(end);
    if (startIso) next.set('start_time', startIso);
    if (endIso) next.set('end_time', endIso);
    go(next);
  };
  const devices = [...fleet.devices.values()].sort((a, b) => (a.sn ?? '').localeCompare(b.sn ?? ''));
  return (
    <>
      <h1>Charging records</h1>
      <form class="panel filters" onSubmit={submit} aria-label="Filter charging records">
        <div class="form-row">
          <label>
            Charger
            <select name="device_id" key={`d-${filters.device_id}`}>
              <option value="">All chargers</option>
              {devices.map((d) => (
                <option key={d.device_id} value={d.device_id} selected={d.device_id === filters.device_id}>
                  {d.sn ?? d.device_id}
                </option>
              ))}
              {filters.device_id && !fleet.devices.has(filters.device_id) ? (
                <option value={filters.device_id} selected>
                  {filters.device_id}
                </option>
              ) : null}
            </select>
          </label>
          <label>
            Connector
            <input
              name="connector_id"
              inputMode="numeric"
              defaultValue={filters.connector_id ?? ''}
              key={`c-${filters.connector_id}`}
            />
          </label>
          <label>
            From
            <input
              name="start_time"
              type="datetime-local"
              defaultValue={isoToLocalInput(filters.start_time)}
              key={`s-${filters.start_time}`}
            />
          </label>
          <label>
            Until
            <input
              name="end_time"
              type="datetime-local"
              defaultValue={isoToLocalInput(filters.end_time)}
              key={`e-${filters.end_time}`}
            />
          </label>
        </div>
        <div class="action-buttons">
          <button type="submit">Apply filters</button>
          <button type="button" class="secondary" onClick={() => go(new URLSearchParams())}>
            Clear
          </button>
          <CsvExport api={api} filters={filters} />
        </div>
      </form>
      <Section title={records.data ? `${records.data.total} records` : 'Records'}>
        <ErrorLine error={records.error} />
        {records.loading && !records.data ? <Loading what="charging records" /> : null}
        {records.data && records.data.items.length === 0 ? <p class="muted">No records match.</p> : null}
        {records.data && records.data.items.length > 0 ? <RecordsTable records={records.data.items} /> : null}
        <Pager
          page={page}
          pages={pages}
          onPage={(p) => {
            const next = new URLSearchParams(query);
            next.set('page', String(p));
            go(next);
          }}
        />
      </Section>
    </>
  );
}

function RecordsTable({ records }: { records: readonly ChargingRecord[] }) {
  const fleet = useFleet();
  return (
    <div class="table-frame">
      <table class="records">
        <thead>
          <tr>
            <th scope="col">Charger</th>
            <th scope="col">Connector</th>
            <th scope="col">Start</th>
            <th scope="col">End</th>
            <th scope="col" class="num">
              Energy
            </th>
            <th scope="col" class="num">
              Max power
            </th>
            <th scope="col">SOC</th>
          </tr>
        </thead>
        <tbody>
          {records.map((r) => (
            <tr
              key={`${r.device_id}/${r.record_id}`}
              data-record-id={r.record_id}
              data-device-id={r.device_id}
            >
              <td>
                <a href={href.device(r.device_id)}>{fleet.devices.get(r.device_id)?.sn ?? r.device_id}</a>
              </td>
              <td>{r.connector_id}</td>
              <td>{dateTime(r.start_time)}</td>
              <td>{dateTime(r.end_time)}</td>
              <td class="num">{kwh(r.energy)}</td>
              <td class="num">{kw(r.max_power)}</td>
              <td>
                {r.vehicle_info?.soc_start ?? '—'} → {r.vehicle_info?.soc_end ?? '—'} %
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Every record matching the filters as one CSV file, read page by page (waiting out a rate limit if hit). */
function CsvExport({ api, filters }: { api: Api; filters: Record<string, string | undefined> }) {
  const [state, setState] = useState<{ busy: boolean; note?: string; error?: string }>({ busy: false });
  const run = async () => {
    setState({ busy: true, note: 'Reading records…' });
    try {
      const rows: ChargingRecord[] = [];
      let total = 0;
      for (let page = 1; rows.length < EXPORT_MAX_ROWS; page++) {
        const p = await withRetry(() =>
          api.get<Page<ChargingRecord>>('/v1/operator/charging-records', { ...filters, page, size: 100 }),
        );
        total = p.total;
        rows.push(...p.items);
        setState({ busy: true, note: `Read ${rows.length} of ${total}…` });
        if (p.items.length < p.size || rows.length >= total) break;
      }
      download(
        `charging-records-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}.csv`,
        recordsToCsv(rows),
      );
      setState({
        busy: false,
        note:
          total > rows.length
            ? `Exported the first ${rows.length} of ${total} records; narrow the filters for the rest.`
            : `Exported ${rows.length} records.`,
      });
    } catch (err) {
      setState({ busy: false, error: describeError(err) });
    }
  };
  return (
    <>
      <button type="button" class="secondary" disabled={state.busy} onClick={run}>
        {state.busy ? 'Exporting…' : 'Export CSV'}
      </button>
      {state.note ? (
        <span class="muted small" role="status" data-export-note="">
          {state.note}
        </span>
      ) : null}
      <ErrorLine error={state.error} />
    </>
  );
}

async function withRetry<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      const wait = err instanceof ApiError ? err.details?.retry_after_seconds : undefined;
      if (!(err instanceof ApiError) || err.status !== 429 || typeof wait !== 'number' || attempt >= 3)
        throw err;
      await new Promise((r) => setTimeout(r, wait * 1000));
    }
  }
}

function download(name: string, text: string): void {
  saveFile(name, new Blob([text], { type: 'text/csv;charset=utf-8' }));
}

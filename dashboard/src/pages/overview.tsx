import { useFleet, useNow } from '../app-context.js';
import { ErrorLine, Loading, Section } from '../components/bits.js';
import { DeviceTable } from '../components/device-table.js';
import type { FleetSummary } from '../fleet.js';
import { kw } from '../format.js';
import { href } from '../router.js';

/** The fleet at a glance: counts and power from the live stream, the sites, and every charger. */
export function Overview() {
  const fleet = useFleet();
  const now = useNow(5000);
  const siteNames = new Map(fleet.sites.map((s) => [s.site_id, s.name]));
  const devices = [...fleet.devices.values()].sort((a, b) =>
    (a.sn ?? a.device_id).localeCompare(b.sn ?? b.device_id),
  );
  return (
    <>
      <h1>Fleet</h1>
      <ErrorLine error={fleet.error} />
      <SummaryCards summary={fleet.summary} />
      {fleet.truncated ? (
        <p class="notice">
          Showing the first {fleet.devices.size} chargers; counts cover those. Use the API for the whole
          fleet.
        </p>
      ) : null}
      <Section title="Sites">
        {fleet.loading && fleet.sites.length === 0 ? (
          <Loading what="sites" />
        ) : (
          <ul class="sites">
            {fleet.sites.map((s) => (
              <li key={s.site_id}>
                <a href={href.site(s.site_id)}>{s.name}</a>{' '}
                <span class="muted">
                  {s.timezone} · {countIn(devices, s.site_id)} chargers
                </span>
              </li>
            ))}
          </ul>
        )}
      </Section>
      <Section title="Chargers">
        {fleet.loading && devices.length === 0 ? (
          <Loading what="chargers" />
        ) : (
          <DeviceTable devices={devices} siteNames={siteNames} now={now} />
        )}
      </Section>
    </>
  );
}

function countIn(devices: readonly { site_id?: string }[], siteId: string): number {
  return devices.filter((d) => d.site_id === siteId).length;
}

export function SummaryCards({ summary }: { summary: FleetSummary }) {
  const cards: Array<[string, string, string]> = [
    ['online', 'Online', String(summary.online)],
    ['offline', 'Offline', String(summary.offline)],
    ['charging', 'Charging', String(summary.charging)],
    ['discharging', 'Discharging', String(summary.discharging)],
    ['faulted', 'Faulted', String(summary.faulted)],
    ['import', 'Charging power', kw(summary.importKw)],
    ['export', 'V2G export', kw(summary.exportKw)],
  ];
  return (
    <ul class="cards" aria-label="Fleet summary">
      {cards.map(([key, label, value]) => (
        <li key={key} class={`card card-${key}`} data-card={key}>
          <span class="card-label">{label}</span>
          <span class="card-value">{value}</span>
        </li>
      ))}
    </ul>
  );
}

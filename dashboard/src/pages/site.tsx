import { useApp, useFleet, useLoad, useNow } from '../app-context.js';
import { ErrorLine, Loading, Section } from '../components/bits.js';
import { DeviceTable } from '../components/device-table.js';
import { EnergyChart } from '../components/energy-chart.js';
import { FlexibilityForm } from '../components/flexibility-form.js';
import { summarize } from '../fleet.js';
import type { SiteView } from '../fleet-store.js';
import { href } from '../router.js';
import { SummaryCards } from './overview.js';

/** One site: its chargers live, its energy, and load flexibility for the whole site. */
export function SitePage({ siteId }: { siteId: string }) {
  const { api } = useApp();
  const fleet = useFleet();
  const now = useNow(5000);
  const site = useLoad(() => api.get<SiteView>(`/v1/operator/sites/${encodeURIComponent(siteId)}`), [siteId]);
  const devices = [...fleet.devices.values()]
    .filter((d) => d.site_id === siteId)
    .sort((a, b) => (a.sn ?? a.device_id).localeCompare(b.sn ?? b.device_id));
  if (site.error) {
    return (
      <>
        <h1>Site</h1>
        <ErrorLine error={site.error} />
        <a href={href.overview()}>Back to the fleet</a>
      </>
    );
  }
  if (!site.data) return <Loading what="the site" />;
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href.overview()}>Fleet</a>
      </nav>
      <h1>{site.data.name}</h1>
      <p class="muted">
        <code>{site.data.site_id}</code> · {site.data.timezone} · {site.data.device_count} chargers
      </p>
      <SummaryCards summary={summarize(new Map(devices.map((d) => [d.device_id, d])))} />
      <Section title="Energy">
        <EnergyChart siteId={siteId} />
      </Section>
      <Section title="Chargers">
        <DeviceTable devices={devices} siteNames={new Map([[siteId, site.data.name]])} now={now} />
      </Section>
      <Section title="Load flexibility">
        <FlexibilityForm siteId={siteId} />
      </Section>
    </>
  );
}

import type { Artifact } from '../../../shared/artifacts.js';
import type { Device } from '../../../shared/resources.js';
import type { UpdateSummary } from '../../../shared/updates.js';
import type { Api } from '../api.js';
import { useApp, useFleet, useLoad, useNow } from '../app-context.js';
import { ErrorLine, Loading, Section } from '../components/bits.js';
import { ArtifactsTable } from '../components/firmware-artifacts.js';
import { UploadForm } from '../components/firmware-upload.js';
import { FleetVersions } from '../components/firmware-versions.js';
import { StartUpdateForm } from '../components/update-form.js';
import { UpdatesTable } from '../components/update-list.js';
import type { Page } from '../fleet-store.js';

/** Like the fleet overview: ten pages of chargers at most, then the page says the counts cover part. */
const MAX_DEVICES = 1000;
const LIST_SIZE = 100;

/**
 * Over-the-air updates (DESIGN.md §19): the versions the fleet runs, the artifacts, uploading one, starting an
 * update and the updates so far. The versions are read afresh here (the fleet store does not follow them).
 */
export function FirmwarePage({ query }: { query: URLSearchParams }) {
  const { api, canWrite } = useApp();
  const fleet = useFleet();
  const now = useNow(5000);
  const devices = useLoad(() => readDevices(api), []);
  const artifacts = useLoad(() => api.get<Page<Artifact>>('/v1/operator/artifacts', { size: LIST_SIZE }), []);
  const updates = useLoad(
    () => api.get<Page<UpdateSummary>>('/v1/operator/updates', { size: LIST_SIZE }),
    [],
  );
  const siteNames = new Map(fleet.sites.map((s) => [s.site_id, s.name]));
  return (
    <>
      <h1>Firmware</h1>
      <ErrorLine error={devices.error} />
      {devices.data ? (
        <FleetVersions
          devices={devices.data.devices}
          truncated={devices.data.truncated}
          query={query}
          siteNames={siteNames}
          now={now}
        />
      ) : (
        <Loading what="the fleet's versions" />
      )}
      <Section
        title="Artifacts"
        actions={
          <button type="button" class="secondary small" onClick={artifacts.reload}>
            Refresh
          </button>
        }
      >
        <ErrorLine error={artifacts.error} />
        {artifacts.data ? (
          <>
            <ArtifactsTable artifacts={artifacts.data.items} onDeleted={artifacts.reload} />
            <PartNote shown={artifacts.data.items.length} total={artifacts.data.total} />
          </>
        ) : artifacts.loading ? (
          <Loading what="artifacts" />
        ) : null}
      </Section>
      {canWrite ? (
        <Section title="Upload an artifact">
          <UploadForm onUploaded={artifacts.reload} />
        </Section>
      ) : null}
      {canWrite && artifacts.data ? (
        <Section title="Start an update">
          <StartUpdateForm artifacts={artifacts.data.items} sites={fleet.sites} onStarted={updates.reload} />
        </Section>
      ) : null}
      <Section
        title="Updates"
        actions={
          <button type="button" class="secondary small" onClick={updates.reload}>
            Refresh
          </button>
        }
      >
        <ErrorLine error={updates.error} />
        {updates.data ? (
          <>
            <UpdatesTable updates={updates.data.items} />
            <PartNote shown={updates.data.items.length} total={updates.data.total} />
          </>
        ) : updates.loading ? (
          <Loading what="updates" />
        ) : null}
      </Section>
    </>
  );
}

/** The lists read one page of the newest; beyond it, the API has the rest. */
function PartNote({ shown, total }: { shown: number; total: number }) {
  if (total <= shown) return null;
  return (
    <p class="muted small">
      The newest {shown} of {total}; the API lists the rest.
    </p>
  );
}

async function readDevices(api: Api): Promise<{ devices: Device[]; truncated: boolean }> {
  const devices: Device[] = [];
  let total = 0;
  for (let page = 1; devices.length < MAX_DEVICES; page++) {
    const p = await api.get<Page<Device>>('/v1/operator/devices', { page, size: 100 });
    total = p.total;
    devices.push(...p.items);
    if (p.items.length < p.size || devices.length >= total) break;
  }
  return { devices, truncated: total > devices.length };
}

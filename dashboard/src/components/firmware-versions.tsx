import type { Device } from '../../../shared/resources.js';
import {
  matchesVersion,
  UNKNOWN_VERSION,
  type VersionField,
  versionCounts,
  versionFilter,
} from '../firmware-rules.js';
import { href } from '../router.js';
import { Section } from './bits.js';
import { DeviceTable } from './device-table.js';

const FIELD_TITLE: Record<VersionField, string> = { agent_version: 'Agent', firmware_version: 'Firmware' };

/**
 * How many chargers run each agent and firmware version. Each count links to the same page listing those
 * chargers (`#/firmware?agent_version=…`), filtered from the list already read: no further request.
 */
export function FleetVersions({
  devices,
  truncated,
  query,
  siteNames,
  now,
}: {
  devices: readonly Device[];
  truncated: boolean;
  query: URLSearchParams;
  siteNames: ReadonlyMap<string, string>;
  now: number;
}) {
  const filter = versionFilter(query);
  const chosen = filter ? devices.filter((d) => matchesVersion(d, filter)) : [];
  return (
    <Section title="Versions across the fleet">
      {truncated ? <p class="notice">Counts cover the first {devices.length} chargers only.</p> : null}
      <div class="versions">
        {(['agent_version', 'firmware_version'] as const).map((field) => (
          <VersionTable key={field} field={field} devices={devices} />
        ))}
      </div>
      {filter ? (
        <div class="version-chargers" data-version-filter={`${filter.field}=${filter.version}`}>
          <h3>
            {chosen.length} chargers on {FIELD_TITLE[filter.field].toLowerCase()} {filter.version}{' '}
            <a href={href.firmware()} class="small">
              (hide the list)
            </a>
          </h3>
          <DeviceTable devices={chosen} siteNames={siteNames} now={now} />
        </div>
      ) : null}
    </Section>
  );
}

function VersionTable({ field, devices }: { field: VersionField; devices: readonly Device[] }) {
  const counts = versionCounts(devices, field);
  return (
    <div class="table-frame">
      <table class="version-counts" data-versions={field}>
        <caption>{FIELD_TITLE[field]} version</caption>
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col" class="num">
              Chargers
            </th>
          </tr>
        </thead>
        <tbody>
          {counts.length === 0 ? (
            <tr>
              <td colSpan={2} class="muted">
                No chargers.
              </td>
            </tr>
          ) : null}
          {counts.map((c) => {
            const label = c.version ?? UNKNOWN_VERSION;
            return (
              <tr key={label} data-version={label}>
                <th scope="row">
                  {c.version === undefined ? <span class="muted">unknown</span> : <code>{label}</code>}
                </th>
                <td class="num">
                  <a
                    href={href.firmware(new URLSearchParams({ [field]: label }))}
                    aria-label={`${c.count} chargers on ${FIELD_TITLE[field].toLowerCase()} ${label}`}
                    data-count={c.count}
                  >
                    {c.count}
                  </a>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

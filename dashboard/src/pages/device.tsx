import { useState } from 'preact/hooks';
import type { Device } from '../../../shared/resources.js';
import { useApp, useFleet, useLoad, useNow } from '../app-context.js';
import { Badge, ErrorLine, Loading, Section } from '../components/bits.js';
import { ConnectorActions, type Sent } from '../components/command-forms.js';
import { ConfigurationTable } from '../components/configuration-table.js';
import { ConnectorMaintenance } from '../components/connector-maintenance.js';
import { CommandsPanel, EventsPanel, SchedulesPanel } from '../components/device-panels.js';
import { DeviceTelemetryChart } from '../components/device-telemetry-chart.js';
import { DiagnosticsPanel } from '../components/diagnostics-panel.js';
import { MaintenanceActions } from '../components/maintenance-actions.js';
import { ScheduleForm } from '../components/schedule-form.js';
import { activityOf, livePower } from '../fleet.js';
import { ago, celsius, dateTime, kw, kwh, percent } from '../format.js';
import { href } from '../router.js';

/**
 * One charger: each connector live with its commands and maintenance, restart, its telemetry (the last hour live,
 * earlier windows scrolled back to), commands, configuration, diagnostics, schedules and events.
 */
export function DevicePage({ deviceId }: { deviceId: string }) {
  const { api } = useApp();
  const fleet = useFleet();
  const now = useNow(1000);
  const [sent, setSent] = useState<Sent[]>([]);
  const [schedulesVersion, setSchedulesVersion] = useState(0);
  const [eventsVersion, setEventsVersion] = useState(0);
  // The fleet's copy is live; a charger outside it (beyond the overview's first 1000) is read once.
  const fetched = useLoad(
    () =>
      fleet.devices.has(deviceId)
        ? Promise.resolve(undefined)
        : api.get<Device>(`/v1/operator/devices/${encodeURIComponent(deviceId)}`),
    [deviceId, fleet.loading],
  );
  const device = fleet.devices.get(deviceId) ?? fetched.data;
  if (!device) {
    if (fleet.loading || fetched.loading) return <Loading what="the charger" />;
    return (
      <>
        <h1>Charger</h1>
        <ErrorLine error={fetched.error ?? `No charger ${deviceId}`} />
        <p>
          <a href={href.overview()}>Back to the fleet</a>
        </p>
      </>
    );
  }
  const site = fleet.sites.find((s) => s.site_id === device.site_id);
  const connectors = device.connectors ?? [];
  const onSent = (s: Sent) => {
    setSent((prev) => [...prev, s]);
    if (s.command === 'set_schedule') setSchedulesVersion((v) => v + 1);
  };
  const activity = activityOf(device);
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href.overview()}>Fleet</a>
        {site ? (
          <>
            {' › '}
            <a href={href.site(site.site_id)}>{site.name}</a>
          </>
        ) : null}
      </nav>
      <h1>
        {device.sn ?? device.device_id} <Badge kind={activity}>{activity}</Badge>
      </h1>
      <dl class="facts">
        <dt>Device ID</dt>
        <dd>
          <code>{device.device_id}</code>
        </dd>
        <dt>Model</dt>
        <dd>
          {device.manufacturer ?? '—'} {device.model ?? ''}
        </dd>
        <dt>Firmware</dt>
        <dd>{device.firmware_version ?? '—'}</dd>
        <dt>Status</dt>
        <dd data-device-status={device.status}>{device.status ?? '—'}</dd>
        <dt>Last heartbeat</dt>
        <dd>{ago(device.last_heartbeat, now)}</dd>
      </dl>
      <ul class="connectors" aria-label="Connectors">
        {connectors.map((c) => {
          const online = device.status === 'online';
          const power = livePower(device, c);
          return (
            <li
              key={c.connector_id}
              class="panel connector"
              data-connector-id={c.connector_id}
              data-state={c.status}
            >
              <h2>
                Connector {c.connector_id}{' '}
                <Badge kind={online ? c.status : 'offline'}>{online ? c.status : 'unavailable'}</Badge>
                {c.v2g_capable ? <Badge kind="v2g">V2G</Badge> : null}
                {c.available === false ? (
                  <Badge kind="unavailable">
                    <span data-out-of-service>out of service</span>
                  </Badge>
                ) : null}
              </h2>
              <dl class="readings">
                <dt>Power</dt>
                <dd data-reading="power" data-value={power.toFixed(2)}>
                  {online ? kw(power) : '—'}
                </dd>
                <dt>SOC</dt>
                <dd data-reading="soc">{percent(c.soc)}</dd>
                <dt>Temperature</dt>
                <dd>{celsius(c.temperature)}</dd>
                <dt>Energy delivered</dt>
                <dd>{kwh(c.energy_delivered)}</dd>
                <dt>Rating</dt>
                <dd>{kw(c.max_power_kw)}</dd>
                <dt>Last telemetry</dt>
                <dd title={dateTime(c.last_telemetry_time)}>{ago(c.last_telemetry_time, now)}</dd>
              </dl>
              <ConnectorActions
                deviceId={device.device_id}
                connectorId={c.connector_id}
                v2g={c.v2g_capable === true}
                onSent={onSent}
              />
              <ConnectorMaintenance
                deviceId={device.device_id}
                connectorId={c.connector_id}
                available={c.available}
                onSent={onSent}
              />
            </li>
          );
        })}
      </ul>
      <MaintenanceActions
        deviceId={device.device_id}
        name={device.sn ?? device.device_id}
        onSent={onSent}
        onBack={() => setEventsVersion((v) => v + 1)}
      />
      <Section title="Telemetry">
        <DeviceTelemetryChart deviceId={device.device_id} />
      </Section>
      <CommandsPanel deviceId={device.device_id} sent={sent} />
      <ConfigurationTable deviceId={device.device_id} onSent={onSent} refreshKey={eventsVersion} />
      <DiagnosticsPanel deviceId={device.device_id} onSent={onSent} />
      <SchedulesPanel
        deviceId={device.device_id}
        connectors={connectors.map((c) => c.connector_id)}
        onSent={onSent}
        refreshKey={schedulesVersion}
      />
      <DeviceScheduleSection
        deviceId={device.device_id}
        connectors={connectors.map((c) => c.connector_id)}
        timezone={site?.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone}
        onSent={onSent}
      />
      <EventsPanel deviceId={device.device_id} refreshKey={eventsVersion} />
    </>
  );
}

function DeviceScheduleSection(props: {
  deviceId: string;
  connectors: readonly number[];
  timezone: string;
  onSent: (s: Sent) => void;
}) {
  const { canWrite } = useApp();
  const [open, setOpen] = useState(false);
  if (!canWrite) return null;
  return (
    <Section
      title="New schedule"
      actions={
        <button type="button" class="secondary" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? 'Close' : 'Set a schedule'}
        </button>
      }
    >
      {open ? (
        <ScheduleForm {...props} />
      ) : (
        <p class="muted small">Charging windows by day or week, kept on the charger.</p>
      )}
    </Section>
  );
}

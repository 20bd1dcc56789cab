import type { Device } from '../../../shared/resources.js';
import { activityOf, livePower } from '../fleet.js';
import { ago, kw } from '../format.js';
import { href } from '../router.js';
import { Badge } from './bits.js';

/** Chargers with their live state; on a phone the table scrolls sideways inside its frame. */
export function DeviceTable({
  devices,
  siteNames,
  now,
}: {
  devices: readonly Device[];
  siteNames: ReadonlyMap<string, string>;
  now: number;
}) {
  if (devices.length === 0) return <p class="muted">No chargers yet.</p>;
  return (
    <div class="table-frame">
      <table class="devices">
        <thead>
          <tr>
            <th scope="col">Charger</th>
            <th scope="col">Site</th>
            <th scope="col">Status</th>
            <th scope="col">Connectors</th>
            <th scope="col" class="num">
              Power
            </th>
            <th scope="col">Last heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {devices.map((d) => {
            const activity = activityOf(d);
            const power = (d.connectors ?? []).reduce((sum, c) => sum + livePower(d, c), 0);
            return (
              <tr key={d.device_id} data-device-id={d.device_id} data-activity={activity}>
                <th scope="row">
                  <a href={href.device(d.device_id)}>{d.sn ?? d.device_id}</a>
                  <div class="muted small">{d.device_id}</div>
                </th>
                <td>
                  {d.site_id ? (
                    <a href={href.site(d.site_id)}>{siteNames.get(d.site_id) ?? d.site_id}</a>
                  ) : (
                    '—'
                  )}
                </td>
                <td>
                  <Badge kind={activity}>{activity}</Badge>
                </td>
                <td>
                  {(d.connectors ?? []).map((c) => (
                    <span key={c.connector_id} class="connector-chip" title={`Connector ${c.connector_id}`}>
                      {c.connector_id}: {d.status === 'online' ? c.status : 'unavailable'}
                      {c.v2g_capable ? ' (V2G)' : ''}
                    </span>
                  ))}
                </td>
                <td class="num" data-power={power.toFixed(2)}>
                  {d.status === 'online' ? kw(power) : '—'}
                </td>
                <td>{ago(d.last_heartbeat, now)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

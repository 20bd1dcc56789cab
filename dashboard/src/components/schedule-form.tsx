import { useState } from 'preact/hooks';
import { compact, newScheduleId, optionalNumber } from '../form-values.js';
import { CommandForm, type Fields, type Sent } from './command-forms.js';

const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
const MAX_SLOTS = 10;

/** A charging schedule for one connector (spec: once, daily or weekly; slots in the schedule's time zone). */
export function ScheduleForm({
  deviceId,
  connectors,
  timezone,
  onSent,
}: {
  deviceId: string;
  connectors: readonly number[];
  timezone: string;
  onSent: (s: Sent) => void;
}) {
  const [slots, setSlots] = useState(1);
  const [connector, setConnector] = useState(connectors[0] ?? 1);
  const [scheduleId] = useState(() => newScheduleId(Date.now(), Math.random));
  const path = `/v1/operator/devices/${encodeURIComponent(deviceId)}/connectors/${connector}/schedule`;
  const body = (f: Fields) => {
    const type = f.get('type');
    const time_slots = Array.from({ length: slots }, (_, i) => {
      const days = f.getAll(`days-${i}`);
      return compact({
        start: f.get(`start-${i}`),
        end: f.get(`end-${i}`),
        power_limit: optionalNumber(f.get(`power-${i}`)),
        action: f.get(`action-${i}`),
        day_of_week: days.length > 0 ? days : undefined,
      });
    });
    return compact({
      schedule_id: f.get('schedule_id'),
      type,
      timezone: f.get('timezone'),
      time_slots,
      target_soc: optionalNumber(f.get('target_soc')),
    });
  };
  return (
    <CommandForm
      label="Set a charging schedule"
      command="set_schedule"
      path={path}
      body={body}
      onSent={onSent}
    >
      <div class="form-row">
        <label>
          Connector
          <select value={String(connector)} onChange={(e) => setConnector(Number(e.currentTarget.value))}>
            {connectors.map((c) => (
              <option key={c} value={String(c)}>
                {c}
              </option>
            ))}
          </select>
        </label>
        <label>
          Schedule ID
          <input name="schedule_id" defaultValue={scheduleId} />
        </label>
        <label>
          Type
          <select name="type">
            <option value="once">once</option>
            <option value="daily" selected>
              daily
            </option>
            <option value="weekly">weekly</option>
          </select>
        </label>
        <label>
          Time zone
          <input name="timezone" defaultValue={timezone} />
        </label>
        <label>
          Target SOC, % (optional)
          <input name="target_soc" inputMode="decimal" />
        </label>
      </div>
      {Array.from({ length: slots }, (_, i) => (
        <fieldset key={i} class="slot">
          <legend>Slot {i + 1}</legend>
          <div class="form-row">
            <label>
              Start
              <input name={`start-${i}`} type="time" defaultValue="22:00" required />
            </label>
            <label>
              End
              <input name={`end-${i}`} type="time" defaultValue="06:00" required />
            </label>
            <label>
              Power limit, kW (optional)
              <input name={`power-${i}`} inputMode="decimal" />
            </label>
            <label>
              Action
              <select name={`action-${i}`}>
                <option value="charge">charge</option>
                <option value="discharge">discharge</option>
                <option value="idle">idle</option>
              </select>
            </label>
          </div>
          <fieldset class="days plain" aria-label={`Slot ${i + 1} days (weekly schedules)`}>
            {DAYS.map((d) => (
              <label key={d} class="inline">
                <input type="checkbox" name={`days-${i}`} value={d} /> {d}
              </label>
            ))}
          </fieldset>
        </fieldset>
      ))}
      <div class="action-buttons">
        <button
          type="button"
          class="secondary"
          disabled={slots >= MAX_SLOTS}
          onClick={() => setSlots(slots + 1)}
        >
          Add slot
        </button>
        <button type="button" class="secondary" disabled={slots <= 1} onClick={() => setSlots(slots - 1)}>
          Remove last slot
        </button>
      </div>
    </CommandForm>
  );
}

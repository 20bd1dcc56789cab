import type { StoredLimit } from '../core/limit-policy.js';
import { isLimitActive } from './policy.js';

/** A stored flexibility limit as `status` and `schedules` report it (`--json`), active or not at `now`. */
export interface LimitReport {
  control_id: string;
  kind: string;
  power_limit_percent: number | null;
  starts_at: string;
  ends_at: string;
  reason: string | null;
  active: boolean;
}

export function limitReport(limit: StoredLimit, now: number): LimitReport {
  return {
    control_id: limit.control_id,
    kind: limit.kind,
    power_limit_percent: limit.power_limit_percent ?? null,
    starts_at: limit.starts_at,
    ends_at: limit.ends_at,
    reason: limit.reason ?? null,
    active: isLimitActive(limit, now),
  };
}

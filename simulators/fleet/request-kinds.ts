/**
 * The kinds of charger-surface requests the fleet counts, and which kinds recover each other's transient
 * failures (`fleet-stats.ts`).
 */
export const REQUEST_KINDS = [
  'register',
  'token',
  'heartbeat',
  'telemetry',
  'telemetry_batch',
  'poll',
  'command_status',
  'events',
  'charging_records',
  'firmware_status',
  'secret_rotate',
  'other',
] as const;
export type RequestKind = (typeof REQUEST_KINDS)[number];

/** The kind of a charger-surface request, from its method and path (query ignored). Pure. */
export function requestKindOf(method: string, path: string): RequestKind {
  const q = path.indexOf('?');
  const p = q === -1 ? path : path.slice(0, q);
  if (!p.startsWith('/v1/device/')) return 'other';
  const rest = p.slice('/v1/device/'.length);
  if (method === 'GET') return rest === 'commands' ? 'poll' : 'other';
  switch (rest) {
    case 'register':
      return 'register';
    case 'token':
      return 'token';
    case 'heartbeat':
      return 'heartbeat';
    case 'telemetry':
      return 'telemetry';
    case 'telemetry/batch':
      return 'telemetry_batch';
    case 'events':
      return 'events';
    case 'charging-records':
      return 'charging_records';
    case 'firmware/status':
      return 'firmware_status';
    case 'secret/rotate':
      return 'secret_rotate';
    default:
      return rest.startsWith('commands/') && rest.endsWith('/status') ? 'command_status' : 'other';
  }
}

/** Which successes show that a charger recovered from a transient failure of a kind. */
export const RECOVERY_GROUP: Record<RequestKind, string> = {
  register: 'register',
  token: 'token',
  heartbeat: 'commands',
  poll: 'commands',
  telemetry: 'telemetry',
  telemetry_batch: 'telemetry',
  command_status: 'command_status',
  events: 'events',
  charging_records: 'charging_records',
  firmware_status: 'firmware_status',
  secret_rotate: 'secret_rotate',
  other: 'other',
};

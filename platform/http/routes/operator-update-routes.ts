import {
  UpdateAccepted,
  UpdateParamsPath,
  UpdateRequest,
  UpdatesPage,
  UpdatesQuery,
  UpdateView,
} from '../../../shared/index.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { principal, read, write } from './operator-access.js';

const BASE = '/v1/operator/updates';
const ONE = `${BASE}/:update_id`;

/** Updates (campaigns, DESIGN.md §19): an artifact rolled out to chargers in batches gated on their health. */
export function operatorUpdateRoutes(ctx: PlatformContext): AnyRoute[] {
  const updates = ctx.updates;
  const common = { tag: 'operator', rate: 'operatorBatchControl' } as const;
  return [
    route({
      ...common,
      method: 'POST',
      url: BASE,
      summary: "Start an update: an artifact to chargers of the artifact's operator, in batches",
      description:
        'Chargers already on the version are skipped. A batch starts when every charger of the previous one has ' +
        'installed and stayed healthy for rollout.health_seconds (online, no fault heartbeat, no error or critical ' +
        'event) or failed; when more than rollout.max_failure_percent of a batch fails, the update pauses ' +
        "itself. A charger may be in one unfinished update at a time (409). `window` is each site's local time.",
      auth: write,
      body: UpdateRequest,
      response: UpdateAccepted,
      errors: [404, 409],
      handler: async ({ body, request }) => updates.create(body, principal(request)),
    }),
    route({
      ...common,
      method: 'GET',
      url: BASE,
      summary: "List the operators' updates, newest first",
      description:
        'A page of the updates of the client’s operators, optionally of one `status` (`running`, `paused`, ' +
        '`completed` or `cancelled`), each with its artifact, targets, settings and `progress` (how many ' +
        'chargers are in each state).',
      auth: read,
      rate: 'operatorQuery',
      query: UpdatesQuery,
      response: UpdatesPage,
      handler: async ({ query, request }) => updates.list(principal(request), query),
    }),
    route({
      ...common,
      method: 'GET',
      url: ONE,
      summary: 'Follow an update: its batches and every charger with its state and versions',
      description:
        'The update as the list shows it, with its `batches` and every charger’s `batch` (0: skipped), `state` ' +
        '(`pending`, `queued`, `downloading`, `install_scheduled`, `installing`, `installed` while in its health ' +
        'check, `succeeded`, `skipped`, `failed`, `rolled_back` or `cancelled`), `reason` and versions. Another ' +
        'operator’s update answers 404 (3001), like a missing one.',
      auth: read,
      rate: 'operatorQuery',
      params: UpdateParamsPath,
      response: UpdateView,
      handler: async ({ params, request }) => updates.get(principal(request), params.update_id),
    }),
    route({
      ...common,
      method: 'POST',
      url: `${ONE}/pause`,
      summary: 'Pause an update: no further batch starts',
      description: 'Chargers already sent the update go on and report.',
      auth: write,
      params: UpdateParamsPath,
      bodyOptional: true,
      response: UpdateView,
      errors: [409],
      handler: async ({ params, request }) => updates.pause(principal(request), params.update_id),
    }),
    route({
      ...common,
      method: 'POST',
      url: `${ONE}/resume`,
      summary: 'Resume a paused update',
      description:
        'A batch that paused the update for its failures no longer holds it back: the next batch starts once ' +
        'that batch is done.',
      auth: write,
      params: UpdateParamsPath,
      bodyOptional: true,
      response: UpdateView,
      errors: [409],
      handler: async ({ params, request }) => updates.resume(principal(request), params.update_id),
    }),
    route({
      ...common,
      method: 'DELETE',
      url: ONE,
      summary: 'Cancel an update',
      description:
        'Queued update commands are cancelled and chargers not yet started are left alone; chargers already ' +
        'downloading or installing finish and report.',
      auth: write,
      params: UpdateParamsPath,
      response: UpdateView,
      errors: [409],
      handler: async ({ params, request }) => updates.cancel(principal(request), params.update_id),
    }),
  ];
}

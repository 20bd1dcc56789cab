import * as z from 'zod';
import {
  ControlParamsPath,
  ControlView,
  FlexibilityAccepted,
  FlexibilityRequest,
} from '../../../shared/index.js';
import { errors } from '../../domain/api-error.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { principal, read, write } from './operator-access.js';

/** Load-flexibility controls: fanned out to a group of chargers, followed and cancelled as one. */
export function operatorControlRoutes(ctx: PlatformContext): AnyRoute[] {
  const controls = ctx.controls;

  return [
    route({
      method: 'POST',
      url: '/v1/operator/control/flexibility',
      summary: 'Send a load-flexibility command to a group of chargers',
      description:
        'One command per charger of the targets (`site` or `operator` ids, 1–100; or `all` the client’s ' +
        'chargers), applying to each of its connectors: `set_power_limit` (`power_limit_percent`, 0–100) or ' +
        '`pause_charging`, for `duration` seconds (1–604800). Each command carries the control’s absolute window ' +
        '(`starts_at`, `ends_at`), so a late delivery cannot stretch it, and expires when the window ends; ' +
        '`device_count` says how many chargers it reached. A target id the client may not see answers 404 ' +
        '(3001), like a missing one.',
      tag: 'operator',
      auth: write,
      rate: 'operatorBatchControl',
      body: FlexibilityRequest,
      response: FlexibilityAccepted,
      errors: [404],
      handler: async ({ body, request }) => controls.start(body, principal(request)),
    }),
    route({
      method: 'GET',
      url: '/v1/operator/control/:control_id',
      summary: 'Follow a flexibility control: status and per-charger progress',
      description:
        'The control’s `status` (`executing`, `completed` once its window has ended, or `cancelled`), command, ' +
        'params, targets and window, with every charger’s command and its status (`progress` counts them by ' +
        'status). A control belongs to the operators of the chargers it reaches and of the sites or operators ' +
        'it names: a client that may not see every one of them gets 404 (3001), exactly as for a missing one.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      params: ControlParamsPath,
      response: ControlView,
      errors: [404],
      handler: async ({ params, request }) => {
        const view = await controls.view(params.control_id, principal(request).operatorIds);
        if (!view) throw errors.notFound('Control');
        return view;
      },
    }),
    route({
      method: 'DELETE',
      url: '/v1/operator/control/:control_id',
      summary: 'Cancel a flexibility control and lift it from the chargers',
      description:
        'Queued commands of the control are cancelled; chargers that already received it get the same command ' +
        'with the window ended now, which lifts the limit.',
      tag: 'operator',
      auth: write,
      rate: 'operatorBatchControl',
      params: ControlParamsPath,
      response: z.object({ control_id: z.string(), status: z.literal('cancelled') }),
      errors: [404, 409],
      handler: async ({ params, request }) => {
        const outcome = await controls.cancel(params.control_id, principal(request));
        if (outcome === 'not_found') throw errors.notFound('Control');
        if (outcome !== 'cancelled') throw errors.conflict(outcome.conflict);
        return { control_id: params.control_id, status: 'cancelled' as const };
      },
    }),
  ];
}

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

import * as z from 'zod';
import {
  DeliveriesPage,
  DeliveryParams,
  WEBHOOKS_PER_CLIENT,
  Webhook,
  WebhookCreate,
  WebhookDelivery,
  WebhookParams,
  WebhooksPage,
  WebhooksQuery,
  WebhookUpdate,
  WebhookWithSecret,
} from '../../../shared/index.js';
import type { WebhookService } from '../../services/webhook-service.js';
import type { AnyRoute } from '../route-spec.js';
import { route } from '../route-spec.js';
import { principal, read, write } from './operator-access.js';

const BASE = '/v1/operator/webhooks';
const ONE = `${BASE}/:webhook_id`;

/** Webhook endpoints (DESIGN.md §14): each API client manages its own. */
export function operatorWebhookRoutes(webhooks: WebhookService): AnyRoute[] {
  const common = { tag: 'operator', rate: 'operatorControl' } as const;
  return [
    route({
      ...common,
      method: 'POST',
      url: BASE,
      summary: 'Create a webhook endpoint (the signing secret is shown in this answer only)',
      description:
        'The endpoint receives signed events (Standard Webhooks) of the client’s operators’ chargers: `events` ' +
        'lists event types, or `["*"]` alone for all. The answer’s `secret` (`whsec_…`) is never shown again ' +
        `(a rotation answers a new one). A client has at most ${WEBHOOKS_PER_CLIENT} endpoints: one more answers ` +
        '409 (4001). A URL that is not public `https` answers 400 (1001) on `url`, unless the platform runs ' +
        'with `--webhooks-allow-private`.',
      auth: write,
      body: WebhookCreate,
      response: WebhookWithSecret,
      errors: [409],
      handler: async ({ body, request }) => webhooks.create(principal(request), body),
    }),
    route({
      ...common,
      method: 'GET',
      url: BASE,
      summary: "List this client's webhook endpoints",
      description:
        'A page of the endpoints this client created, without their secrets; other clients’ endpoints are not ' +
        'listed.',
      auth: read,
      rate: 'operatorQuery',
      query: WebhooksQuery,
      response: WebhooksPage,
      handler: async ({ query, request }) => webhooks.list(principal(request), query.page, query.size),
    }),
    route({
      ...common,
      method: 'GET',
      url: ONE,
      summary: 'Get a webhook endpoint',
      description:
        'The endpoint’s `url`, `events`, `description`, `status` and `disabled_reason` (why it was disabled), ' +
        'without its secret. Another client’s endpoint answers 404 (3001), like a missing one.',
      auth: read,
      rate: 'operatorQuery',
      params: WebhookParams,
      response: Webhook,
      errors: [404],
      handler: async ({ params, request }) => webhooks.get(principal(request), params.webhook_id),
    }),
    route({
      ...common,
      method: 'PATCH',
      url: ONE,
      summary: 'Change the URL, events, description or status of a webhook endpoint',
      description: 'Enabling an endpoint again clears its failure record; its pending deliveries resume.',
      auth: write,
      params: WebhookParams,
      body: WebhookUpdate,
      response: Webhook,
      errors: [404],
      handler: async ({ params, body, request }) =>
        webhooks.update(principal(request), params.webhook_id, body),
    }),
    route({
      ...common,
      method: 'DELETE',
      url: ONE,
      summary: 'Delete a webhook endpoint and its delivery log',
      description: 'Another client’s endpoint answers 404 (3001), like a missing one.',
      auth: write,
      params: WebhookParams,
      response: z.object({ webhook_id: z.string(), deleted: z.literal(true) }),
      errors: [404],
      handler: async ({ params, request }) => {
        await webhooks.remove(principal(request), params.webhook_id);
        return { webhook_id: params.webhook_id, deleted: true as const };
      },
    }),
    route({
      ...common,
      method: 'POST',
      url: `${ONE}/rotate-secret`,
      summary: 'Replace the signing secret; the previous one keeps signing beside it for 24 hours',
      description:
        'Answers the endpoint with its new `secret` (shown only here). For 24 hours each delivery carries two ' +
        'signatures, separated by a space, so a receiver holding either secret accepts it. The body may be left ' +
        'out. Another client’s endpoint answers 404 (3001).',
      auth: write,
      params: WebhookParams,
      bodyOptional: true,
      body: z.strictObject({}),
      response: WebhookWithSecret,
      errors: [404],
      handler: async ({ params, request }) => webhooks.rotateSecret(principal(request), params.webhook_id),
    }),
    route({
      ...common,
      method: 'POST',
      url: `${ONE}/test`,
      summary: 'Send a webhook.test event to the endpoint',
      description:
        'Queues a `webhook.test` event (`data`: the `webhook_id`) for this endpoint and answers its ' +
        '`delivery_id`; follow it in the delivery log. A disabled endpoint answers 409 (4001), another client’s ' +
        '404 (3001). The body may be left out.',
      auth: write,
      params: WebhookParams,
      bodyOptional: true,
      body: z.strictObject({}),
      response: z.object({ delivery_id: z.string() }),
      errors: [404, 409],
      handler: async ({ params, request }) => webhooks.sendTest(principal(request), params.webhook_id),
    }),
    route({
      ...common,
      method: 'GET',
      url: `${ONE}/deliveries`,
      summary: "The endpoint's delivery log, newest first",
      description:
        'A page of the deliveries: `type`, `attempts`, `state` (`pending`, `succeeded` or `failed`), ' +
        '`last_status` (the HTTP status of the last attempt, null without an answer), `last_error` (a category ' +
        'such as `timeout` or `http_status`, never the socket’s message) and `next_attempt_at` while pending. ' +
        'Another client’s endpoint answers 404 (3001).',
      auth: read,
      rate: 'operatorQuery',
      params: WebhookParams,
      query: WebhooksQuery,
      response: DeliveriesPage,
      errors: [404],
      handler: async ({ params, query, request }) =>
        webhooks.deliveries(principal(request), params.webhook_id, query.page, query.size),
    }),
    route({
      ...common,
      method: 'POST',
      url: `${ONE}/deliveries/:delivery_id/redeliver`,
      summary: 'Send a delivery again now (same webhook-id)',
      description:
        'Makes the delivery pending again, due now, keeping its `delivery_id` (the `webhook-id` header), and ' +
        'answers it. A delivery the endpoint does not have, or another client’s endpoint, answers 404 (3001). ' +
        'The body may be left out.',
      auth: write,
      params: DeliveryParams,
      bodyOptional: true,
      body: z.strictObject({}),
      response: WebhookDelivery,
      errors: [404],
      handler: async ({ params, request }) =>
        webhooks.redeliver(principal(request), params.webhook_id, params.delivery_id),
    }),
  ];
}

import { WEBHOOK_EVENT_TYPES, webhookEventBody } from '../../shared/index.js';
import { type JsonSchema, jsonSchema } from './json-schema.js';

/** The events a webhook endpoint receives (DESIGN.md §14), one POST each, signed per Standard Webhooks. */
export function webhookOperations(): Record<string, JsonSchema> {
  const header = (name: string, description: string, schema: JsonSchema) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema,
  });
  const out: Record<string, JsonSchema> = {};
  for (const type of WEBHOOK_EVENT_TYPES) {
    out[type] = {
      post: {
        tags: ['webhooks'],
        summary: `${type} event`,
        operationId: `webhook${type
          .split(/[._]/)
          .map((p) => p[0]!.toUpperCase() + p.slice(1))
          .join('')}`,
        parameters: [
          header('webhook-id', 'The delivery id: the same on every retry (your idempotency key)', {
            type: 'string',
          }),
          header('webhook-timestamp', 'Unix seconds of this attempt', {
            type: 'string',
            pattern: '^[0-9]+$',
          }),
          header(
            'webhook-signature',
            'v1,base64(HMAC-SHA256(secret, id.timestamp.body)); two, space-separated, during a rotation',
            { type: 'string' },
          ),
        ],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: jsonSchema(webhookEventBody(type), 'output') } },
        },
        responses: {
          '2XX': { description: 'Received: any 2xx ends the delivery' },
          '410': { description: 'Gone: the platform disables the endpoint' },
          default: { description: 'Anything else, or no answer in 15 s: retried on the schedule' },
        },
      },
    };
  }
  return out;
}

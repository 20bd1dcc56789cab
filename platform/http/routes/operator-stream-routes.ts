import { STREAM_TICKET_TTL_SECONDS, StreamTicket } from '../../../shared/index.js';
import { issueStreamTicket } from '../auth/stream-tickets.js';
import type { PlatformContext } from '../context.js';
import { type AnyRoute, route } from '../route-spec.js';
import { read } from './operator-access.js';

/** What opens the live stream without an access token in its URL (the stream itself: stream/telemetry-stream.ts). */
export function operatorStreamRoutes(ctx: PlatformContext): AnyRoute[] {
  return [
    route({
      method: 'POST',
      url: '/v1/operator/stream/tickets',
      summary: 'A one-use ticket to open the live telemetry stream',
      description:
        `Answers a \`ticket\` that opens one connection to \`wss://HOST/v1/operator/stream?ticket=…\` within ` +
        `${STREAM_TICKET_TTL_SECONDS} seconds, as this client, for browsers (which cannot set Authorization on a ` +
        'WebSocket): no access token then appears in a URL. A ticket works once; the connection it opens ends ' +
        'when the access token used here expires (4401), as one opened with the token itself. No body.',
      tag: 'operator',
      auth: read,
      rate: 'operatorQuery',
      response: StreamTicket,
      handler: async ({ request }) => issueStreamTicket(ctx, request.headers.authorization),
    }),
  ];
}

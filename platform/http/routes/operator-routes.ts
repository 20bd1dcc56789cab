import type { WebhookService } from '../../services/webhook-service.js';
import type { PlatformContext } from '../context.js';
import type { AnyRoute } from '../route-spec.js';
import { operatorArtifactRoutes } from './operator-artifact-routes.js';
import { operatorCommandRoutes } from './operator-command-routes.js';
import { operatorControlRoutes } from './operator-control-routes.js';
import { operatorDiagnosticsRoutes } from './operator-diagnostics-routes.js';
import { operatorMaintenanceRoutes } from './operator-maintenance-routes.js';
import { operatorReadRoutes } from './operator-read-routes.js';
import { operatorStreamRoutes } from './operator-stream-routes.js';
import { operatorTokenRoute } from './operator-token.js';
import { operatorUpdateRoutes } from './operator-update-routes.js';
import { operatorWebhookRoutes } from './operator-webhook-routes.js';

/** Every operator route, in the order the OpenAPI document lists them. */
export function operatorRoutes(ctx: PlatformContext, webhooks: WebhookService): AnyRoute[] {
  return [
    operatorTokenRoute(ctx),
    ...operatorReadRoutes(ctx),
    ...operatorStreamRoutes(ctx),
    ...operatorCommandRoutes(ctx),
    ...operatorMaintenanceRoutes(ctx),
    ...operatorDiagnosticsRoutes(ctx),
    ...operatorControlRoutes(ctx),
    ...operatorWebhookRoutes(webhooks),
    ...operatorArtifactRoutes(ctx),
    ...operatorUpdateRoutes(ctx),
  ];
}

import type { RegistrationPolicy } from '../domain/registration.js';
import type { TokenService } from '../services/access-tokens.js';
import type { ArtifactDownloads } from '../services/artifact-downloads.js';
import type { ArtifactService } from '../services/artifact-service.js';
import type { ClientTokenService } from '../services/client-token-service.js';
import type { CommandNotifier } from '../services/command-notifier.js';
import type { CommandService } from '../services/command-service.js';
import type { ControlService } from '../services/control-service.js';
import type { DeviceReportingService } from '../services/device-reporting-service.js';
import type { DeviceSecretService } from '../services/device-secret-service.js';
import type { DiagnosticsService } from '../services/diagnostics-service.js';
import type { DiagnosticsUploads } from '../services/diagnostics-upload.js';
import type { Liveness } from '../services/liveness.js';
import type { MaintenanceService } from '../services/maintenance-service.js';
import type { OperatorCommandService } from '../services/operator-command-service.js';
import type { OperatorReadService } from '../services/operator-read-service.js';
import type { PlatformEvents } from '../services/platform-events.js';
import type { PrincipalDirectory } from '../services/principal-directory.js';
import type { RegistrationService } from '../services/registration-service.js';
import type { Tenancy } from '../services/tenancy.js';
import type { UpdateService } from '../services/update-service.js';
import type { WebhookEvents } from '../services/webhook-events.js';
import type { PlatformKeys } from '../storage/platform-keys.js';
import type { RateLimiter } from './rate-limit/rate-limiter.js';
import type { ReplayCache } from './replay-cache.js';

export interface PlatformOptions {
  env: 'production' | 'sandbox';
  registration: RegistrationPolicy;
  tokenTtlSeconds: number;
  /** Where newly registered chargers go (the sandbox's default site). */
  defaultSiteId?: string | undefined;
}

/**
 * What every route needs, built once by `buildPlatform`: the services, auth, rate limits, the clock. No store:
 * routes reach storage through services.
 */
export interface PlatformContext {
  options: PlatformOptions;
  tokens: TokenService;
  keys: PlatformKeys;
  directory: PrincipalDirectory;
  rateLimiter: RateLimiter;
  replayCache: ReplayCache;
  notifier: CommandNotifier;
  /** Every command change; the one place that wakes long polls and publishes command events. */
  commands: CommandService;
  /** Operator access tokens: a client's secret checked, then a token issued. */
  clientTokens: ClientTokenService;
  /** Device token exchange and two-phase secret rotation (DESIGN.md §17). */
  secrets: DeviceSecretService;
  /** What an actor's operators may reach; another tenant's answers like a missing one. */
  tenancy: Tenancy;
  /** A charger's heartbeats, telemetry, events, records, firmware reports and command polls. */
  reporting: DeviceReportingService;
  /** Operator reads: sites, chargers, events, charging records, energy. */
  reads: OperatorReadService;
  /** Commands an operator sends to one connector, and following or cancelling them. */
  operatorCommands: OperatorCommandService;
  /** Remote maintenance of one charger: reset, availability, unlock, configuration (DESIGN.md §20). */
  maintenance: MaintenanceService;
  /** Diagnostics archives: operators ask for them, follow them and download them (DESIGN.md §20). */
  diagnostics: DiagnosticsService;
  /** Chargers' uploads of diagnostics archives, resumable, checked once whole. */
  diagnosticsUploads: DiagnosticsUploads;
  /** Load-flexibility controls. */
  controls: ControlService;
  /** Update artifacts: an operator's signed files, stored in chunks (DESIGN.md §19). */
  artifacts: ArtifactService;
  /** Chargers' downloads of artifacts, at most 64 at once per instance. */
  downloads: ArtifactDownloads;
  /** Updates (campaigns) rolling artifacts out in batches. */
  updates: UpdateService;
  /** Chargers registering on first connection (DESIGN.md §3, §18). */
  registration: RegistrationService;
  metrics: PlatformMetrics;
  events: PlatformEvents;
  /** Queues webhook deliveries for what the stream does not carry (registrations, faults, records, …). */
  webhooks: WebhookEvents;
  liveness: Liveness;
  now: () => number;
}

/** Counters the routes feed; implemented with prom-client in metrics.ts. */
export interface PlatformMetrics {
  rateLimited(rateClass: string): void;
}

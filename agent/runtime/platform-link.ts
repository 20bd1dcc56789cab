/**
 * The agent's way to the platform: the HTTP client (signing writes when configured, stamped in platform
 * time), the device credentials it registers and renews tokens with, the API behind those tokens, and the
 * periodic two-phase secret rotation.
 */
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { RegisterRequest } from '../../shared/device-api.js';
import type { Clock } from '../clock.js';
import type { ConnectorInfo, DeviceInfo } from '../hal.js';
import { createDeviceCredentials, type DeviceCredentials } from '../link/device-credentials.js';
import { createPlatformClient, type DeviceApi, type PlatformClient } from '../link/platform-client.js';
import { createSecretRotation, type SecretRotation } from '../link/secret-rotation.js';
import type { AgentStore } from '../store/agent-store.js';
import type { AgentRuntimeConfig, AgentTuning } from './tuning.js';

export interface PlatformLinkOptions {
  config: AgentRuntimeConfig;
  store: AgentStore;
  clock: Clock;
  logger: Logger;
  random: () => number;
  tuning: AgentTuning;
  /** Replaces the HTTP connection pool (tests). */
  dispatcher?: Dispatcher;
  connectors: readonly ConnectorInfo[];
  /** The hardware's description as last read (it may change once the HAL has started). */
  deviceInfo: () => DeviceInfo;
  /** Platform minus agent clock, ms, as the heartbeat measures it. */
  skewMs: () => number;
  /** The version this start runs as (AGENT_VERSION unless a simulated release layer runs another). */
  agentVersion: string;
  /** Days between secret rotations as the remote configuration has it now (DESIGN.md §20). */
  secretRotationDays: () => number;
}

export interface PlatformLink {
  client: PlatformClient;
  credentials: DeviceCredentials;
  /** The device API with tokens obtained and renewed by `credentials`. */
  deviceApi: DeviceApi;
  rotation: SecretRotation;
}

export function createPlatformLink(options: PlatformLinkOptions): PlatformLink {
  const { config, store, clock, logger, random, tuning, connectors } = options;
  const client = createPlatformClient({
    baseUrl: config.platformUrl,
    ...(config.ca !== undefined ? { ca: config.ca } : {}),
    ...(config.clientCert !== undefined ? { clientCert: config.clientCert } : {}),
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    timeoutMs: tuning.requestTimeoutMs,
    now: () => clock.now(),
    signing: () => {
      const identity = config.signRequests ? store.getIdentity() : undefined;
      if (!identity) return undefined;
      // Stamped in platform time: the platform refuses stamps more than 300 s off its own clock.
      const platformNow = clock.now() + options.skewMs();
      return { secret: identity.secret, timestampSeconds: Math.floor(platformNow / 1000) };
    },
  });
  const credentials = createDeviceCredentials({
    store,
    client,
    clock,
    logger,
    sn: config.sn,
    platformUrl: config.platformUrl,
    registration: () => registrationOf(config, connectors, options.deviceInfo(), options.agentVersion),
    random,
    backoff: tuning.backoff,
  });
  const deviceApi = client.withTokens(credentials);
  const rotation = createSecretRotation({
    credentials,
    api: deviceApi,
    clock,
    days: options.secretRotationDays,
    backoff: tuning.backoff,
    random,
  });
  return { client, credentials, deviceApi, rotation };
}

function registrationOf(
  config: AgentRuntimeConfig,
  connectors: readonly ConnectorInfo[],
  hal: { model?: string; manufacturer?: string; firmwareVersion?: string },
  agentVersion: string,
): RegisterRequest {
  return {
    sn: config.sn,
    model: config.model ?? hal.model ?? 'unknown',
    manufacturer: config.manufacturer ?? hal.manufacturer ?? 'unknown',
    firmware_version: config.firmware ?? hal.firmwareVersion ?? agentVersion,
    agent_version: agentVersion,
    connectors: connectors.map((c) => ({
      connector_id: c.connectorId,
      max_power_kw: c.ratedPowerKw,
      v2g_capable: c.v2gCapable,
    })),
  };
}

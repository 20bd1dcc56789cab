import { MockAgent } from 'undici';
import type { TokenSource } from '../../agent/link/platform-client.js';
import { PlatformError } from '../../agent/link/platform-errors.js';

/**
 * A platform the agent's client is tested against without a network (undici's MockAgent), the envelopes it
 * answers with, a token source that counts its renewals, and the PlatformError a call fails with
 * (platform-client, platform-client-regressions, device-credentials tests).
 */

export const BASE = 'https://platform.test';
export const ok = (data: unknown) => ({ code: 0, message: 'success', data });
export const err = (code: number, message: string, details?: Record<string, unknown>) => ({
  code,
  message,
  ...(details ? { details } : {}),
});
export const json = { headers: { 'content-type': 'application/json' } };
export const SERVER_TIME = '2026-05-01T12:00:00.000Z';

export function mockPlatform() {
  const agent = new MockAgent();
  agent.disableNetConnect();
  return { agent, pool: agent.get(BASE) };
}

export function countingTokens(): TokenSource & { renewals: number } {
  const source = {
    renewals: 0,
    current: 't1',
    async token() {
      return source.current;
    },
    async renew() {
      source.renewals += 1;
      source.current = `t${source.renewals + 1}`;
      return source.current;
    },
  };
  return source;
}

export async function caught(promise: Promise<unknown>): Promise<PlatformError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof PlatformError) return error;
    throw error;
  }
  throw new Error('expected a PlatformError');
}

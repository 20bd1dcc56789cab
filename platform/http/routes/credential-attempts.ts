import type { FastifyReply } from 'fastify';
import type { PlatformContext } from '../context.js';
import { addressKey } from '../rate-limit/address-key.js';
import { applyDecision } from '../route-spec.js';

/** The guard classes that count failed credential attempts (rate-limiter.ts GUARD_LIMITS). */
export type FailureClass = 'operatorTokenFailures' | 'deviceTokenFailures' | 'registerFailures';

/**
 * The counter of one claimed id at one source address (DESIGN.md §18): a flood of wrong secrets locks out the
 * address it comes from (an IPv6 one's /64, `addressKey`), never the id everywhere. The address goes first: it
 * holds no space, so no id can make two pairs share a key.
 */
export function failureSubject(claimedId: string, address: string): string {
  return `${address} ${claimedId}`;
}

export interface CredentialAttempt {
  /** Counts this attempt as failed; refuses it with 429 instead when it went past the budget meanwhile. */
  failed(): Promise<void>;
}

/**
 * Before an id's credentials are checked: refuses with 429/5001 (Retry-After, RateLimit headers) while this
 * address has spent its failures for this id, without counting anything. Only a failure the caller reports
 * counts, so the id's holder, elsewhere or with the right secret after the window, is never refused for it.
 */
export async function beginCredentialAttempt(
  ctx: PlatformContext,
  rate: FailureClass,
  claimedId: string,
  address: string,
  reply: FastifyReply,
): Promise<CredentialAttempt> {
  const subject = failureSubject(claimedId, addressKey(address));
  applyDecision(ctx, rate, await ctx.rateLimiter.peek(rate, subject), reply);
  return {
    async failed() {
      applyDecision(ctx, rate, await ctx.rateLimiter.check(rate, subject), reply);
    },
  };
}

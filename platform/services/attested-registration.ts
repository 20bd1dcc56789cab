import type { Socket } from 'node:net';
import { errors } from '../domain/api-error.js';
import { ATTESTATION_MESSAGES, verifyAttestation } from '../domain/attestation.js';
import { presentedChain } from '../http/auth/client-certificate.js';
import type { PlatformContext } from '../http/context.js';
import type { DeviceRepository } from '../storage/store.js';

type Policy = Parameters<DeviceRepository['registerDevice']>[1];

/**
 * The registration policy for one `POST /v1/device/register` (DESIGN.md §3, §18). Under `attested` the
 * connection's client certificate must be vouched for by an active enrolment group (domain/attestation.ts),
 * else 403/2003 saying what is missing; the charger then goes to the group's site, if it names one.
 */
export async function registrationPolicy(ctx: PlatformContext, sn: string, socket: Socket): Promise<Policy> {
  const { registration, defaultSiteId } = ctx.options;
  if (registration !== 'attested') return { registration, defaultSiteId };
  const chain = presentedChain(socket);
  // Without a certificate there is nothing to check the groups against.
  const groups = chain.length > 0 ? await ctx.store.activeEnrolments() : [];
  const outcome = verifyAttestation({ sn, chain, groups, nowMs: ctx.now() });
  if (!outcome.ok) throw errors.forbidden(ATTESTATION_MESSAGES[outcome.refusal]);
  return {
    registration,
    defaultSiteId: outcome.group.site_id ?? undefined,
    enrolment: { enrolment_id: outcome.group.enrolment_id, operator_id: outcome.group.operator_id },
  };
}

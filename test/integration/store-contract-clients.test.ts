import { describe, expect, it } from 'vitest';
import { loadOrCreatePlatformKeys } from '../../platform/storage/platform-keys.js';
import { BACKENDS } from '../helpers/backends.js';
import { createClientOf, rotateClientSecretOf } from '../helpers/sealed-writes.js';
import { storePerTest } from '../helpers/store-per-test.js';
import { webhookRow } from '../helpers/webhook-receiver.js';

/**
 * The contract of an operator client's lifecycle (DESIGN.md §18) on every backend: listing without secrets,
 * revocation (idempotent, disabling the client's webhook endpoints in the same transaction) and secret
 * rotation with and without a grace, as the principal directory and the token endpoint read them.
 */
const T0 = Date.UTC(2030, 0, 15, 12);

describe.each(BACKENDS)('store contract: client lifecycle (%s)', (backend) => {
  const ctx = storePerTest(backend, T0);

  async function twoClients() {
    const a = await ctx.store.createOperator('A');
    const b = await ctx.store.createOperator('B');
    ctx.tick(5);
    const first = await createClientOf(ctx, {
      operator_ids: [b.operator_id, a.operator_id],
      scopes: ['read'],
    });
    ctx.tick(5);
    const second = await createClientOf(ctx, { operator_ids: [a.operator_id], scopes: ['read', 'write'] });
    return { a, b, first, second };
  }

  it('a new client is active at generation 1 with no previous secret', async () => {
    const { first } = await twoClients();
    expect(first.client).toMatchObject({ status: 'active', secret_gen: 1, previous_secret_sealed: null });
    expect(await ctx.store.getClient(first.client.client_id)).toEqual({
      ...first.client,
      operator_ids: [...first.client.operator_ids].sort(),
    });
    expect(await ctx.store.loadClientEntry(first.client.client_id)).toMatchObject({
      status: 'active',
      secret_gen: 1,
      previous_secret_until_ms: null,
    });
  });

  it('lists every client oldest first, with operators, scopes, status and creation time, never a secret', async () => {
    const { a, b, first, second } = await twoClients();
    const list = await ctx.store.listClients();
    expect(list).toEqual([
      {
        client_id: first.client.client_id,
        operator_ids: [a.operator_id, b.operator_id].sort(),
        scopes: ['read'],
        status: 'active',
        created_ms: T0 + 5,
      },
      {
        client_id: second.client.client_id,
        operator_ids: [a.operator_id],
        scopes: ['read', 'write'],
        status: 'active',
        created_ms: T0 + 10,
      },
    ]);
    expect(JSON.stringify(list)).not.toContain(first.client.secret_sealed);
    expect(JSON.stringify(list)).not.toContain(first.secret);
  });

  it('revokes once, says so the second time, and knows an unknown client', async () => {
    const { first, second } = await twoClients();
    expect(await ctx.store.revokeClient(first.client.client_id)).toBe('revoked');
    expect(await ctx.store.revokeClient(first.client.client_id)).toBe('already_revoked');
    expect(await ctx.store.revokeClient('cli_missing')).toBe('unknown');
    expect((await ctx.store.getClient(first.client.client_id))?.status).toBe('revoked');
    expect((await ctx.store.loadClientEntry(first.client.client_id))?.status).toBe('revoked');
    const dir = await ctx.store.loadDirectory();
    expect(dir.clients.find((c) => c.client_id === first.client.client_id)?.status).toBe('revoked');
    expect(dir.clients.find((c) => c.client_id === second.client.client_id)?.status).toBe('active');
    expect((await ctx.store.listClients()).map((c) => c.status)).toEqual(['revoked', 'active']);
  });

  it('revoking disables the client’s enabled webhook endpoints, and only its own', async () => {
    const { first, second } = await twoClients();
    const mine = first.client.client_id;
    await ctx.store.createWebhook(
      webhookRow('wh_mine', { client_id: mine, created_ms: T0, updated_ms: T0 }),
      10,
    );
    await ctx.store.createWebhook(
      webhookRow('wh_off', {
        client_id: mine,
        status: 'disabled',
        disabled_reason: 'operator',
        created_ms: T0,
        updated_ms: T0,
      }),
      10,
    );
    await ctx.store.createWebhook(
      webhookRow('wh_other', { client_id: second.client.client_id, created_ms: T0, updated_ms: T0 }),
      10,
    );
    ctx.tick(1_000);
    await ctx.store.revokeClient(mine);
    expect(await ctx.store.getWebhook('wh_mine')).toMatchObject({
      status: 'disabled',
      disabled_reason: 'client_revoked',
    });
    // Disabled before by its operator: the reason given then stands.
    expect(await ctx.store.getWebhook('wh_off')).toMatchObject({
      status: 'disabled',
      disabled_reason: 'operator',
    });
    expect(await ctx.store.getWebhook('wh_other')).toMatchObject({
      status: 'enabled',
      disabled_reason: null,
    });
  });

  it('rotates with a grace: the new secret is current, the old one previous until the grace ends', async () => {
    const { first } = await twoClients();
    const id = first.client.client_id;
    const rotation = await rotateClientSecretOf(ctx, id, 3_600_000);
    if (rotation.outcome !== 'rotated') throw new Error(rotation.outcome);
    expect(rotation.secret).not.toBe(first.secret);
    expect(rotation.secret_gen).toBe(2);
    const row = await ctx.store.getClient(id);
    expect(row).toMatchObject({
      status: 'active',
      secret_gen: 2,
      previous_secret_until_ms: T0 + 10 + 3_600_000,
    });
    expect(loadOrCreatePlatformKeys(ctx.dataDir).openSecret(row!.secret_sealed)).toBe(rotation.secret);
    expect(loadOrCreatePlatformKeys(ctx.dataDir).openSecret(row!.previous_secret_sealed!)).toBe(first.secret);
    expect(await ctx.store.loadClientEntry(id)).toMatchObject({
      secret_gen: 2,
      secret_sealed: row!.secret_sealed,
      previous_secret_until_ms: T0 + 10 + 3_600_000,
    });

    // A second rotation keeps only the secret it replaced beside the new one.
    ctx.tick(60_000);
    const again = await rotateClientSecretOf(ctx, id, 0);
    if (again.outcome !== 'rotated') throw new Error(again.outcome);
    expect(again.secret_gen).toBe(3);
    expect(await ctx.store.getClient(id)).toMatchObject({
      secret_gen: 3,
      previous_secret_sealed: null,
      previous_secret_until_ms: null,
    });
    expect(
      loadOrCreatePlatformKeys(ctx.dataDir).openSecret((await ctx.store.getClient(id))!.secret_sealed),
    ).toBe(again.secret);
  });

  it('does not rotate a revoked or unknown client, and revoking ends a grace', async () => {
    const { first } = await twoClients();
    const id = first.client.client_id;
    expect((await rotateClientSecretOf(ctx, id, 60_000)).outcome).toBe('rotated');
    await ctx.store.revokeClient(id);
    expect(await ctx.store.getClient(id)).toMatchObject({
      status: 'revoked',
      secret_gen: 2,
      previous_secret_sealed: null,
      previous_secret_until_ms: null,
    });
    expect(await rotateClientSecretOf(ctx, id, 60_000)).toEqual({ outcome: 'revoked' });
    expect((await ctx.store.getClient(id))?.secret_gen).toBe(2);
    expect(await rotateClientSecretOf(ctx, 'cli_missing', 60_000)).toEqual({ outcome: 'unknown' });
  });

  it('tells the principal directory of every change (externalChangeVersion moves)', async () => {
    // As `serve` opens it: on PostgreSQL only a server store listens for the announcements.
    await ctx.reopenAsServer();
    const { first } = await twoClients();
    const id = first.client.client_id;
    for (const change of [() => rotateClientSecretOf(ctx, id, 1_000), () => ctx.store.revokeClient(id)]) {
      const before = ctx.store.externalChangeVersion();
      await change();
      await expect.poll(() => ctx.store.externalChangeVersion(), { timeout: 5_000 }).not.toBe(before);
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESTART_EXIT_CODE } from '../../agent/core/release-trial.js';
import { type AgentRunProcess, tempDir, waitFor } from '../helpers/agent.js';
import { startRegisteredAgent } from '../helpers/agent-cli.js';
import { createTenant, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * A reset of the BUILT agent (`node dist/agent/cli.js run`, DESIGN.md §20): it reports the command `succeeded`
 * before it goes, then stops cleanly and exits with the restart code (75) for the launcher or systemd to start it
 * again. Run `npm run build` first.
 */

let tp: TestPlatform;
let tenant: Awaited<ReturnType<typeof createTenant>>;
const tmp = tempDir('agent-reset-');
const running: AgentRunProcess[] = [];

beforeAll(async () => {
  tp = await startTestPlatform();
  tenant = await createTenant(tp, 'agent-reset');
});

afterAll(async () => {
  for (const agent of running) agent.child.kill('SIGKILL');
  await tp?.stop();
  tmp.remove();
});

describe('a reset of the agent process', () => {
  it('reports succeeded, then exits with the restart code', async () => {
    const { deviceId } = await startRegisteredAgent({
      tp,
      tenant,
      dir: tmp.dir,
      sn: `RESET-${process.pid}`,
      running,
    });
    const sent = await tp.http.post(`/v1/operator/devices/${deviceId}/reset`, {
      token: tenant.token,
      json: { mode: 'immediate' },
    });
    expect(sent.status, sent.text).toBe(200);
    const exited = await running[0]!.exited;
    expect(exited, running[0]!.stderr().slice(-2_000)).toEqual({ code: RESTART_EXIT_CODE, signal: null });
    // Its report went out before it did.
    const command = await waitFor(
      () => tp.store.getCommand(sent.body.data.command_id),
      (c) => c?.command.status === 'succeeded',
      5_000,
    );
    expect(command?.command).toMatchObject({ status: 'succeeded', reason: 'restarting the agent' });
    expect(running[0]!.lines().some((l) => l.msg === 'restarting for a reset')).toBe(true);
  });
});

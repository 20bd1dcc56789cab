import { commandExpiryMs, type OperatorCommandKind } from '../domain/operator-commands.js';
import type { NewCommand } from '../storage/store.js';
import type { CommandService } from './command-service.js';
import type { OperatorPrincipal } from './principal.js';

/**
 * Queues one command an operator sent to one of its chargers, expiring as COMMAND_EXPIRY_SECONDS says for its
 * kind (counted from the same instant as its creation); answers what the operator endpoints answer.
 */
export async function queueOperatorCommand(
  commands: CommandService,
  actor: OperatorPrincipal,
  command: { kind: OperatorCommandKind; deviceId: string; params: Record<string, unknown> },
  nowMs: number,
): Promise<{ command_id: string; status: 'queued' }> {
  const row: NewCommand = {
    device_id: command.deviceId,
    command: command.kind,
    params: command.params,
    expiry_ms: commandExpiryMs(command.kind, nowMs),
    client_id: actor.clientId,
  };
  const [queued] = await commands.queue([row], nowMs);
  return { command_id: queued!.command_id, status: 'queued' };
}

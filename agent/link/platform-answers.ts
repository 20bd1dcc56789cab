/**
 * Reading the platform's answers: the commands a heartbeat or poll delivers (each checked only as far as the
 * agent needs to answer for it), and the response envelopes, built once per data schema.
 */
import * as z from 'zod/mini';
import { envelopeOf } from '../../shared/envelope.js';
import { Identifier, Timestamp } from '../../shared/primitives.js';

/**
 * A command as delivered, checked only as far as the agent needs to answer for it: a command with a valid id
 * but an unknown name or bad params must still be journaled and refused, not make the whole heartbeat fail.
 */
export const IncomingCommand = z.object({
  command_id: Identifier,
  command: z.string(),
  params: z.unknown(),
  expiry: z.string(),
});
export type IncomingCommand = z.infer<typeof IncomingCommand>;
export const CommandsPayload = z.object({ commands: z.array(z.unknown()), server_time: Timestamp });

export interface CommandsReceived {
  commands: IncomingCommand[];
  /** Entries without even a usable command_id: they cannot be answered, only logged. */
  unusable: number;
  serverTime: string;
}

/** Where delivered commands go (the command executor). */
export interface CommandReceiver {
  /** Takes delivered commands; new ones are journaled and queued on the runner, repeats are ignored. */
  receive(commands: readonly IncomingCommand[]): { fresh: number; repeats: number };
}

/** What a delivered entry needs to be answered at all: its id. */
const AnswerableCommand = z.object({ command_id: Identifier });

/** A stand-in name for a `command` that is not a string: no command has it, so it is refused, by its type. */
function nameOf(value: unknown): string {
  if (typeof value === 'string') return value;
  return `<${value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value}>`;
}

export function commandsOf(data: z.infer<typeof CommandsPayload>): CommandsReceived {
  const commands: IncomingCommand[] = [];
  let unusable = 0;
  for (const item of data.commands) {
    const parsed = IncomingCommand.safeParse(item);
    if (parsed.success) {
      commands.push(parsed.data);
      continue;
    }
    // A usable id with a name or expiry of the wrong type: journaled and refused like any malformed command;
    // left unanswered, the platform would deliver it again on every heartbeat until it expired.
    const answerable = AnswerableCommand.safeParse(item);
    if (!answerable.success) {
      unusable += 1;
      continue;
    }
    const raw = item as { command?: unknown; params?: unknown; expiry?: unknown };
    commands.push({
      command_id: answerable.data.command_id,
      command: nameOf(raw.command),
      params: raw.params,
      expiry: typeof raw.expiry === 'string' ? raw.expiry : '',
    });
  }
  return { commands, unusable, serverTime: data.server_time };
}

/** Envelope schemas, built once per data schema: building zod schemas on every response costs memory and CPU. */
const envelopes = new WeakMap<z.core.$ZodType, z.core.$ZodType>();
export function envelopeSchema(schema: z.core.$ZodType): z.core.$ZodType {
  let envelope = envelopes.get(schema);
  if (!envelope) {
    envelope = envelopeOf(schema);
    envelopes.set(schema, envelope);
  }
  return envelope;
}

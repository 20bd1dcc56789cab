/**
 * Errors after which the agent cannot go on by itself: a person (technician or operator) has to act. Each
 * carries what to tell them and the process exit code, so that systemd and scripts can tell them apart
 * (`charger-agent run` exit codes: 0 clean stop, 1 unexpected failure, 2 usage or configuration,
 * 3 the platform refuses this charger's identity).
 */

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
export const EXIT_IDENTITY_REFUSED = 3;

export class AgentFatalError extends Error {
  readonly exitCode: number;
  /** What the technician should do, one sentence. */
  readonly hint: string;
  constructor(message: string, hint: string, exitCode: number = EXIT_FAILURE) {
    super(message);
    this.name = 'AgentFatalError';
    this.hint = hint;
    this.exitCode = exitCode;
  }
}

export function isAgentFatalError(error: unknown): error is AgentFatalError {
  return error instanceof AgentFatalError;
}

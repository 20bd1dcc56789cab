/**
 * The first fatal error of a running agent (the platform refuses its identity, say): logged, recorded for
 * the technician's `status`, and handed to whoever waits on `fatal`. Later ones are ignored.
 */
import type { Logger } from 'pino';
import type { AgentFatalError } from '../agent-errors.js';
import { type Clock, iso } from '../clock.js';
import type { AgentStore } from '../store/agent-store.js';

export interface FatalLatch {
  /** Settles with the first fatal error; never settles otherwise. */
  readonly fatal: Promise<AgentFatalError>;
  fail(error: AgentFatalError): void;
  failed(): boolean;
}

export function createFatalLatch(store: AgentStore, clock: Clock, logger: Logger): FatalLatch {
  let resolveFatal: (error: AgentFatalError) => void = () => {};
  const fatal = new Promise<AgentFatalError>((resolve) => {
    resolveFatal = resolve;
  });
  let failed = false;
  return {
    fatal,
    fail(error) {
      if (failed) return;
      failed = true;
      logger.fatal({ hint: error.hint }, error.message);
      try {
        store.setState('last_error', {
          at: iso(clock.now()),
          where: 'fatal',
          message: `${error.message} — ${error.hint}`,
        });
      } catch {
        // The store is closed already (a late answer during shutdown): the log line above is what remains.
      }
      resolveFatal(error);
    },
    failed: () => failed,
  };
}

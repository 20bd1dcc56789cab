/**
 * The two parts of undici the agent uses — its connection pool (`Agent`) and the process-wide default dispatcher
 * — without the rest: `import 'undici'` evaluates all of it (fetch, WebSocket, EventSource, caches, mocks, proxy
 * agents), 14 MiB of RSS a charger does not need (docs/benchmarks.md, "Agent footprint"). The agent only
 * dispatches requests with its own handler (platform-client.ts), so neither the request API mixin nor anything
 * else of the index is needed. Typed from undici's own declarations.
 */
import type { Dispatcher, Agent as UndiciAgent } from 'undici';
import AgentClass from 'undici/lib/dispatcher/agent.js';
import dispatcherGlobals from 'undici/lib/global.js';

export const Agent = AgentClass as typeof UndiciAgent;
export type Agent = UndiciAgent;

export const getGlobalDispatcher = (dispatcherGlobals as { getGlobalDispatcher(): Dispatcher })
  .getGlobalDispatcher;

/** The agent's own version, sent as the User-Agent and recorded in the store (technician diagnostics). */
export const AGENT_VERSION = '0.1.0';

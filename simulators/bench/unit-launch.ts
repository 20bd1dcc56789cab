/**
 * How the systemd unit shipped with the agent bundle starts Node (docs/charger-agent.service): the options
 * before the script on its `ExecStart=` line and the variables of its `Environment=` lines, so that a benchmark
 * runs the agent exactly as a charger does, and the unit's settings cannot drift from what was measured.
 */
export interface UnitLaunch {
  /** Node's own options, between the node binary and the script (e.g. `--max-semi-space-size=1`). */
  nodeArgs: string[];
  /** `Environment=` assignments, in order (a later one wins, as in systemd). */
  env: Record<string, string>;
}

export function unitLaunch(unitText: string): UnitLaunch {
  const nodeArgs: string[] = [];
  const env: Record<string, string> = {};
  for (const raw of unitText.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('ExecStart=')) {
      const words = line.slice('ExecStart='.length).split(/\s+/).filter(Boolean);
      // The first word is Node; its options end at the first word that is not one (the script).
      for (const word of words.slice(1)) {
        if (!word.startsWith('-')) break;
        nodeArgs.push(word);
      }
    } else if (line.startsWith('Environment=')) {
      for (const assignment of line.slice('Environment='.length).split(/\s+(?=[A-Za-z_][A-Za-z0-9_]*=)/)) {
        const at = assignment.indexOf('=');
        if (at > 0) env[assignment.slice(0, at)] = assignment.slice(at + 1);
      }
    }
  }
  return { nodeArgs, env };
}

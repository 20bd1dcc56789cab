/** The diag report for people: one line per check, its hint below when there is something to do. */

import { printableLines } from '../terminal-text.js';
import type { CheckStatus } from './outcome.js';
import type { DiagReport } from './run-diag.js';

const LABEL: Record<CheckStatus, string> = { pass: 'PASS', warn: 'WARN', fail: 'FAIL', skip: 'SKIP' };

export function renderDiag(report: DiagReport): string {
  const who = report.sn
    ? `${report.sn}${report.device_id ? ` (${report.device_id})` : ' (not registered)'}`
    : report.data_dir;
  const lines = [`charger-agent diag — ${who}${report.platform_url ? `, ${report.platform_url}` : ''}`, ''];
  const width = Math.max(...report.checks.map((c) => c.name.length));
  for (const c of report.checks) {
    lines.push(`${LABEL[c.status]}  ${c.name.padEnd(width)}  ${c.detail}`);
    if (c.hint && c.status !== 'pass') lines.push(`${' '.repeat(6 + width + 2)}hint: ${c.hint}`);
  }
  const failed = report.checks.filter((c) => c.status === 'fail').length;
  const warned = report.checks.filter((c) => c.status === 'warn').length;
  lines.push('');
  lines.push(
    failed === 0
      ? `All checks passed${warned > 0 ? ` (${warned} warning${warned > 1 ? 's' : ''})` : ''}.`
      : `${failed} check${failed > 1 ? 's' : ''} failed${warned > 0 ? `, ${warned} warning${warned > 1 ? 's' : ''}` : ''}.`,
  );
  return printableLines(`${lines.join('\n')}\n`);
}

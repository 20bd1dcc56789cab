import { describe, expect, it } from 'vitest';
import {
  decideStatusReport,
  mayCancel,
  type ReportedStatus,
} from '../../../platform/domain/command-lifecycle.js';
import { CommandStatus } from '../../../shared/index.js';

const ALL = CommandStatus.options;

describe('decideStatusReport: reports only move a command forward', () => {
  // [current, reported, decision]
  it.each<[CommandStatus, ReportedStatus, string]>([
    ['queued', 'accepted', 'advance'],
    ['queued', 'succeeded', 'advance'],
    ['delivered', 'accepted', 'advance'],
    ['delivered', 'rejected', 'advance'],
    ['delivered', 'failed', 'advance'],
    ['accepted', 'succeeded', 'advance'],
    ['accepted', 'failed', 'advance'],
    ['accepted', 'accepted', 'unchanged'],
    ['succeeded', 'succeeded', 'unchanged'],
    ['succeeded', 'accepted', 'unchanged'],
    ['succeeded', 'failed', 'unchanged'],
    ['failed', 'succeeded', 'unchanged'],
    ['rejected', 'accepted', 'unchanged'],
    ['expired', 'succeeded', 'conflict'],
    ['expired', 'accepted', 'conflict'],
    ['cancelled', 'accepted', 'conflict'],
    ['cancelled', 'rejected', 'conflict'],
  ])('%s, then %s reported: %s', (current, reported, kind) => {
    const decision = decideStatusReport(current, reported);
    expect(decision.kind).toBe(kind);
    if (decision.kind === 'advance') expect(decision.status).toBe(reported);
    if (decision.kind === 'conflict') expect(decision.status).toBe(current);
  });
});

describe('mayCancel', () => {
  it('only a queued command, which no charger has seen yet', () => {
    expect(ALL.filter(mayCancel)).toEqual(['queued']);
  });
});

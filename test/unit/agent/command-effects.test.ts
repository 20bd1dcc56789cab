import { describe, expect, it } from 'vitest';
import {
  type AppliedOutcome,
  overrideVerdict,
  type WantedMode,
} from '../../../agent/core/command-effects.js';
import type { ConnectorTarget } from '../../../agent/core/connector-policy.js';
import type { ConnectorReading } from '../../../agent/hal.js';

const target = (mode: ConnectorTarget['mode'], reason = 'schedule', powerLimitKw = 11): ConnectorTarget => ({
  mode,
  powerLimitKw,
  reason,
  source: 'override',
  activeLimitIds: [],
});
const reading = (vehiclePresent: boolean): ConnectorReading => ({
  connectorId: 1,
  state: 'idle',
  voltageV: 230,
  currentA: 0,
  powerKw: 0,
  energyKwh: 0,
  vehiclePresent,
  temperatureC: 25,
  faultCode: 0,
});

interface Row {
  case: string;
  outcome: AppliedOutcome | undefined;
  wanted: WantedMode;
  status: string;
  reason: RegExp;
  drop: boolean;
  retrigger: boolean;
}

describe('how a control pass reads as a hardware command report', () => {
  const rows: Row[] = [
    {
      case: 'unknown connector',
      outcome: undefined,
      wanted: 'charge',
      status: 'failed',
      reason: /not known to the hardware/,
      drop: true,
      retrigger: false,
    },
    {
      case: 'unknown connector, stop',
      outcome: undefined,
      wanted: 'idle',
      status: 'failed',
      reason: /not known/,
      drop: true,
      retrigger: false,
    },
    {
      case: 'hardware refused a start',
      outcome: { target: target('charge'), error: new Error('contactor') },
      wanted: 'charge',
      status: 'failed',
      reason: /hardware refused: contactor/,
      drop: true,
      retrigger: true,
    },
    {
      case: 'hardware refused a stop: the stop stays',
      outcome: { target: target('idle'), error: new Error('busy') },
      wanted: 'idle',
      status: 'failed',
      reason: /hardware refused: busy/,
      drop: false,
      retrigger: false,
    },
    {
      case: 'stopped with a vehicle',
      outcome: { target: target('idle'), reading: reading(true) },
      wanted: 'idle',
      status: 'succeeded',
      reason: /^stopped; stays off/,
      drop: false,
      retrigger: false,
    },
    {
      case: 'stop without a vehicle',
      outcome: { target: target('idle'), reading: reading(false) },
      wanted: 'idle',
      status: 'succeeded',
      reason: /nothing to stop: no vehicle on connector 1/,
      drop: false,
      retrigger: false,
    },
    {
      case: 'start held by a pause',
      outcome: { target: target('idle', 'paused by ctl_1') },
      wanted: 'charge',
      status: 'failed',
      reason: /^not charging: paused by ctl_1$/,
      drop: true,
      retrigger: true,
    },
    {
      case: 'charging',
      outcome: { target: target('charge', 'start', 7.4) },
      wanted: 'charge',
      status: 'succeeded',
      reason: /^charging at up to 7.4 kW$/,
      drop: false,
      retrigger: false,
    },
    {
      case: 'discharging',
      outcome: { target: target('discharge', 'discharge', 5) },
      wanted: 'discharge',
      status: 'succeeded',
      reason: /^discharging at up to 5 kW$/,
      drop: false,
      retrigger: false,
    },
  ];
  it.each(rows)('$case', ({ outcome, wanted, status, reason, drop, retrigger }) => {
    const verdict = overrideVerdict(outcome, 1, wanted);
    expect(verdict.report.status).toBe(status);
    expect(verdict.report.reason).toMatch(reason);
    expect(verdict.dropOverride).toBe(drop);
    expect(verdict.retrigger).toBe(retrigger);
  });
});

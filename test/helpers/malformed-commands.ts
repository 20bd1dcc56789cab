import fc from 'fast-check';
import { CommandParams } from '../../shared/commands.js';
import { Identifier } from '../../shared/primitives.js';
import { CommandName } from '../../shared/resources.js';
import type { Json } from './agent-fuzz.js';

/**
 * The commands agent-fuzz-commands.test.ts delivers: valid ones, and malformed ones by fault (unknown or
 * non-string names, invalid params field by field and wholesale, bad or past expiries, unknown connectors,
 * discharge without V2G hardware), entries without a usable id, and redeliveries of earlier ids.
 */

export type Entry = Record<string, Json>;
export type Spec =
  | { kind: 'valid'; entry: Entry }
  | { kind: 'garbage'; fault: string; expect: RegExp; entry: Entry }
  | { kind: 'unusable'; entry: Entry }
  | { kind: 'repeat'; of: number; entry: Entry };

const FAR_EXPIRY = '2099-01-01T00:00:00.000Z';
const id = fc.stringMatching(/^[A-Za-z0-9_.:-]{1,24}$/);
const kw = fc.double({ min: 0.1, max: 1000, noNaN: true });
const slot = (v2g: boolean) =>
  fc.record(
    {
      start: fc.constant('00:00'),
      end: fc.constant('00:00'),
      power_limit: fc.double({ min: 0, max: 1000, noNaN: true }),
      action: v2g ? fc.constantFrom('charge', 'idle', 'discharge') : fc.constantFrom('charge', 'idle'),
    },
    { requiredKeys: ['start', 'end'] },
  );
const schedule = (v2g: boolean) =>
  fc.record({
    schedule_id: id,
    type: fc.constant('daily'),
    time_slots: fc.array(slot(v2g), { minLength: 1, maxLength: 2 }),
    timezone: fc.constantFrom('UTC', 'Europe/Berlin'),
  });

/** Valid params by command; everything valid succeeds (vehicles are plugged in, no pause is ever sent). */
const VALID: Record<string, fc.Arbitrary<Entry>> = {
  stop: fc.record(
    { connector_id: fc.constantFrom(1, 2), reason: fc.string({ maxLength: 64 }) },
    { requiredKeys: ['connector_id'] },
  ),
  start: fc.record(
    { connector_id: fc.constantFrom(1, 2), power_limit: kw, target_soc: fc.integer({ min: 95, max: 100 }) },
    { requiredKeys: ['connector_id'] },
  ),
  discharge: fc.record({
    connector_id: fc.constant(2),
    discharge_power: kw,
    duration: fc.integer({ min: 60, max: 600 }),
    min_soc: fc.integer({ min: 0, max: 40 }),
  }),
  set_schedule: fc.oneof(
    fc.record({ connector_id: fc.constant(1), schedule: schedule(false) }),
    fc.record({ connector_id: fc.constant(2), schedule: schedule(true) }),
  ),
  delete_schedule: fc.record({ connector_id: fc.constantFrom(1, 2), schedule_id: id }),
  set_power_limit: fc.record({
    control_id: id,
    power_limit_percent: fc.integer({ min: 1, max: 100 }),
    duration: fc.constant(60),
    starts_at: fc.constant('2020-01-01T00:00:00.000Z'),
    ends_at: fc.constant(FAR_EXPIRY),
  }),
};
const VALID_COMMAND = fc
  .constantFrom(...Object.keys(VALID))
  .chain((command) => VALID[command]!.map((params) => ({ command, params, expiry: FAR_EXPIRY })));

/** One field of valid params replaced by a value its schema refuses (checked with the schema itself). */
const BAD_VALUES: Record<string, readonly Json[]> = {
  connector_id: ['1', 0, -1, 1.5, 1e300, null, true, [1]],
  power_limit: [-1, 1000.5, '7', null],
  target_soc: [101, -1, 50.5, '80'],
  discharge_power: [0, -3, 1001, '5'],
  duration: [0, 604_801, 1.5, '60'],
  min_soc: [-1, 101, 20.5],
  power_limit_percent: [101, -1, 50.5, '50'],
  starts_at: ['yesterday', '', 17, '2026-13-01T00:00:00Z'],
  ends_at: ['tomorrow', null],
  control_id: ['has space', '', 'a/b', 'x'.repeat(65)],
  schedule_id: ['has space', '', '../etc'],
  schedule: [{}, null, 'daily', { schedule_id: 's', type: 'daily', time_slots: [], timezone: 'UTC' }],
  reason: [7, 'r'.repeat(201)],
};
const BAD_PARAMS = VALID_COMMAND.chain(({ command, params }) =>
  fc
    .oneof(
      fc.tuple(fc.constantFrom(...Object.keys(params)), fc.nat()).map(([key, i]) => {
        const values = BAD_VALUES[key] ?? [null];
        return { ...params, [key]: values[i % values.length] };
      }),
      fc.jsonValue({ maxDepth: 3 }),
      fc.constant(undefined),
      command === 'set_schedule'
        ? fc.constant({ ...params, schedule: { ...(params.schedule as Entry), surplus: 1 } })
        : fc.constant({ ...params, connector_id: 'one' }),
    )
    .filter((p) => !CommandParams[command as keyof typeof CommandParams].safeParse(p).success)
    .map((p) => ({ command, params: p, expiry: FAR_EXPIRY })),
);

const GARBAGE: fc.Arbitrary<Omit<Extract<Spec, { kind: 'garbage' }>, 'kind'>> = fc.oneof(
  fc
    .tuple(
      VALID_COMMAND,
      fc.oneof(
        fc.string({ maxLength: 30 }).filter((s) => !CommandName.safeParse(s).success),
        fc.constantFrom(
          'STOP',
          'stop ',
          'Stop',
          'reboot',
          '__proto__',
          'constructor',
          'set_schedule\u0000',
          '',
        ),
        fc.string({ minLength: 5_000, maxLength: 20_000 }),
        fc.integer(),
        fc.constantFrom(null, true, [], ['stop'], { name: 'stop' }, undefined),
      ),
    )
    .map(([c, name]) => {
      const entry: Entry = { ...c, command: name };
      if (name === undefined) delete entry.command;
      return { fault: 'name', expect: /^unsupported command /, entry };
    }),
  fc
    .tuple(
      VALID_COMMAND,
      fc.oneof(
        fc.string({ maxLength: 30 }).filter((s) => {
          const t = Date.parse(s);
          return Number.isNaN(t) || t < Date.now();
        }),
        fc.constantFrom('', 'tomorrow', '2020-01-01T00:00:00Z', '1970-01-01T00:00:00.000Z', '1', 'NaN'),
        fc.integer(),
        fc.constantFrom(null, {}, [], undefined),
      ),
    )
    .map(([c, expiry]) => {
      const entry: Entry = { ...c, expiry };
      if (expiry === undefined) delete entry.expiry;
      return { fault: 'expiry', expect: /^(invalid expiry|command expired at )/, entry };
    }),
  BAD_PARAMS.map((entry) => ({ fault: 'params', expect: /^invalid params: /, entry })),
  fc
    .tuple(
      fc.constantFrom('stop', 'start', 'discharge', 'set_schedule', 'delete_schedule'),
      fc.integer({ min: 3, max: 2_147_483_647 }),
    )
    .chain(([command, connector]) =>
      VALID[command]!.map((params) => ({
        fault: 'connector',
        expect: /^unknown connector \d+ \(this charger has 1, 2\)$/,
        entry: { command, params: { ...params, connector_id: connector }, expiry: FAR_EXPIRY },
      })),
    ),
  fc
    .oneof(
      VALID.discharge!.map((params) => ({ command: 'discharge', params: { ...params, connector_id: 1 } })),
      schedule(true).map((s) => ({
        command: 'set_schedule',
        params: {
          connector_id: 1,
          schedule: {
            ...s,
            time_slots: [...s.time_slots, { start: '01:00', end: '02:00', action: 'discharge' }],
          },
        },
      })),
    )
    .map((c) => ({
      fault: 'v2g',
      expect: /^connector 1 has no V2G hardware/,
      entry: { ...c, expiry: FAR_EXPIRY },
    })),
);

const UNUSABLE_ID = fc
  .oneof(
    fc.constantFrom(
      undefined,
      '',
      'has space',
      'a/b',
      '../x',
      'x'.repeat(65),
      42,
      null,
      ['a'],
      { a: 1 },
      'id\u0000',
      'ü',
    ),
    fc.string({ maxLength: 80 }),
  )
  .filter((v) => !Identifier.safeParse(v).success);

export const SPECS = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: VALID_COMMAND.map((entry): Spec => ({ kind: 'valid', entry })) },
    { weight: 5, arbitrary: GARBAGE.map((g): Spec => ({ kind: 'garbage', ...g })) },
    {
      weight: 1,
      arbitrary: fc.tuple(UNUSABLE_ID, fc.oneof(VALID_COMMAND, fc.jsonValue())).map(([cid, c]): Spec => {
        const entry: Entry =
          c !== null && typeof c === 'object' && !Array.isArray(c) ? { ...c } : { command: c };
        if (cid === undefined) delete entry.command_id;
        else entry.command_id = cid;
        return { kind: 'unusable', entry };
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.nat(), fc.oneof(VALID_COMMAND, BAD_PARAMS))
        .map(([of, entry]): Spec => ({ kind: 'repeat', of, entry })),
    },
  ),
  { minLength: 20, maxLength: 35 },
);

/** Jobs a test holds open and lets finish itself (`Maintenance.runAlone` tests): no clocks. */

/** A promise the test settles itself. */
export function gate<T = void>() {
  let open!: (value: T) => void;
  let fail!: (err: unknown) => void;
  const promise = new Promise<T>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

/** A job that says when it started and finishes (with `value`, or `error`) when the test lets it. */
export function heldJob<T>(value: T) {
  const started = gate();
  const finish = gate();
  let calls = 0;
  return {
    started: started.promise,
    calls: () => calls,
    finish: () => finish.open(),
    fail: (err: unknown) => finish.fail(err),
    run: async () => {
      calls++;
      started.open();
      await finish.promise;
      return value;
    },
  };
}

/** A `run` that must not be called. */
export function neverRun(): { run: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    run: async () => {
      calls++;
      return 'should not run';
    },
    calls: () => calls,
  };
}

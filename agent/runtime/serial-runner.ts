/**
 * One exclusive runner: tasks run one at a time, in the order they were given.
 *
 * The agent drives the hardware from two places — commands and the control loop's re-evaluation — and a
 * `stop` racing a re-evaluation that restarts charging would leave the connector in whichever state lost the
 * race. Everything that changes the HAL or the policy state therefore runs through one runner. A task must not
 * queue another task and wait for it (that would deadlock); code already inside a task calls the work directly.
 */

export interface SerialRunner {
  /** Queues `task`; resolves or rejects with its outcome. A failing task does not stop later ones. */
  run<T>(task: () => Promise<T> | T): Promise<T>;
  /** Resolves once every task queued so far has settled. */
  idle(): Promise<void>;
  /** Tasks queued or running. */
  readonly depth: number;
}

export function createSerialRunner(): SerialRunner {
  let tail: Promise<unknown> = Promise.resolve();
  let depth = 0;
  return {
    run<T>(task: () => Promise<T> | T): Promise<T> {
      depth += 1;
      const result = tail.then(task).finally(() => {
        depth -= 1;
      });
      // The chain continues whatever the task's outcome; the caller sees the outcome through `result`.
      tail = result.catch(() => undefined);
      return result;
    },
    idle() {
      return tail.then(() => undefined);
    },
    get depth() {
      return depth;
    },
  };
}

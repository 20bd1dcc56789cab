/**
 * Group commit for PostgreSQL: writes submitted while the database is busy wait and go together, as one
 * statement (one commit, one WAL flush) for many requests. Idle, a write goes at once; under load the groups
 * grow by themselves, so throughput follows the load instead of one commit per request (a commit waits for
 * its WAL flush: about 1,300 single-row commits a second here, against tens of thousands of rows in groups).
 *
 * A group that fails is retried one write at a time, so that one bad write (a constraint it breaks) fails
 * alone and its neighbours are stored.
 */
export interface GroupWriterOptions {
  /** Groups written at once (each on its own pooled connection). */
  maxInFlight: number;
  /** A group takes at most this much (summed `weight`), so a statement stays of bounded size. */
  maxWeight: number;
}

export function createGroupWriter<T, R>(
  /** Writes a group in one statement; answers each write's result, in order. */
  writeGroup: (items: readonly T[]) => Promise<readonly R[]>,
  weight: (item: T) => number,
  options: GroupWriterOptions,
) {
  interface Pending {
    item: T;
    resolve: (result: R) => void;
    reject: (err: unknown) => void;
  }
  let queue: Pending[] = [];
  let inFlight = 0;
  let scheduled = false;

  const takeGroup = (): Pending[] => {
    let w = 0;
    let n = 0;
    while (n < queue.length && (n === 0 || w + weight(queue[n]!.item) <= options.maxWeight)) {
      w += weight(queue[n]!.item);
      n++;
    }
    const group = queue.slice(0, n);
    queue = queue.slice(n);
    return group;
  };

  const settleOneByOne = async (group: readonly Pending[]) => {
    for (const p of group) {
      try {
        const [result] = await writeGroup([p.item]);
        p.resolve(result as R);
      } catch (err) {
        p.reject(err);
      }
    }
  };

  const write = async (group: readonly Pending[]) => {
    try {
      const results = await writeGroup(group.map((p) => p.item));
      group.forEach((p, i) => {
        p.resolve(results[i] as R);
      });
    } catch (err) {
      if (group.length === 1) group[0]!.reject(err);
      else await settleOneByOne(group);
    }
  };

  const pump = () => {
    scheduled = false;
    while (inFlight < options.maxInFlight && queue.length > 0) {
      const group = takeGroup();
      inFlight++;
      void write(group).finally(() => {
        inFlight--;
        pump();
      });
    }
  };

  return {
    submit(item: T): Promise<R> {
      return new Promise<R>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        // Writes of the same event-loop turn join one group.
        if (!scheduled && inFlight < options.maxInFlight) {
          scheduled = true;
          setImmediate(pump);
        }
      });
    },
    /** Writes waiting or under way. */
    pending: () => queue.length + inFlight,
  };
}

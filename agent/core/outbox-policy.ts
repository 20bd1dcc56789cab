/**
 * What the agent's outbox gives up when it is full (a long outage on a charger with little flash).
 *
 * Telemetry is the most replaceable (a gap in a power curve), so the oldest telemetry goes first; then the
 * oldest events. Charging records (billing), command statuses and firmware statuses (the operator's answer to
 * what happened) are never dropped: if they alone exceed the cap, the outbox grows past it rather than lose them.
 */

export const OUTBOX_KINDS = [
  'telemetry',
  'event',
  'charging_record',
  'command_status',
  'firmware_status',
] as const;
export type OutboxKind = (typeof OUTBOX_KINDS)[number];

/** Kinds that may be dropped, in the order they are dropped. */
export const DROP_ORDER: readonly OutboxKind[] = ['telemetry', 'event'];

export function isDroppable(kind: OutboxKind): boolean {
  return DROP_ORDER.includes(kind);
}

export interface OutboxCap {
  maxItems: number;
  maxBytes: number;
}

export interface OutboxUsage {
  items: number;
  bytes: number;
}

export interface QueuedItem {
  seq: number;
  kind: OutboxKind;
  bytes: number;
}

export interface DropPlan {
  /** Seqs to delete. */
  drop: number[];
  droppedByKind: Partial<Record<OutboxKind, number>>;
  /** Usage once the drops are done. */
  usage: OutboxUsage;
  /** Still over the cap: only items that are never dropped remain to give up. */
  overCap: boolean;
}

export function isOverCap(usage: OutboxUsage, cap: OutboxCap): boolean {
  return usage.items > cap.maxItems || usage.bytes > cap.maxBytes;
}

/**
 * Which queued items to drop so that `usage` fits `cap`. `queuedByKind` yields each kind's items oldest
 * first; it is consumed lazily, only as far as needed, so a store can stream them from disk.
 */
export function planDrops(
  usage: OutboxUsage,
  cap: OutboxCap,
  queuedByKind: Partial<Record<OutboxKind, Iterable<QueuedItem>>>,
): DropPlan {
  const plan: DropPlan = { drop: [], droppedByKind: {}, usage: { ...usage }, overCap: isOverCap(usage, cap) };
  for (const kind of DROP_ORDER) {
    if (!plan.overCap) break;
    for (const item of queuedByKind[kind] ?? []) {
      plan.drop.push(item.seq);
      plan.droppedByKind[kind] = (plan.droppedByKind[kind] ?? 0) + 1;
      plan.usage.items -= 1;
      plan.usage.bytes -= item.bytes;
      plan.overCap = isOverCap(plan.usage, cap);
      if (!plan.overCap) break;
    }
  }
  return plan;
}

/** Groups a list of queued items by kind, oldest first: the input `planDrops` wants. */
export function groupByKind(items: readonly QueuedItem[]): Partial<Record<OutboxKind, QueuedItem[]>> {
  const groups: Partial<Record<OutboxKind, QueuedItem[]>> = {};
  for (const item of [...items].sort((a, b) => a.seq - b.seq)) {
    const group = groups[item.kind] ?? [];
    group.push(item);
    groups[item.kind] = group;
  }
  return groups;
}

/**
 * A binary min-heap of deadlines, so the leader finds the sessions whose
 * time has come without walking all of them on every tick. Entries are
 * never updated in place: a record that moves its deadline later keeps its
 * old entry, and the reader re-queues it when that entry surfaces (a
 * heartbeat stays O(1)). Ties pop in the order they were pushed, so the
 * order is a function of the calls alone (the simulator replays it).
 */
export interface DeadlineEntry<T> {
  readonly atMs: number;
  readonly seq: number;
  readonly item: T;
}

export class DeadlineHeap<T> {
  private readonly heap: DeadlineEntry<T>[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(atMs: number, item: T): void {
    const entry: DeadlineEntry<T> = { atMs, seq: this.seq++, item };
    const h = this.heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  /** The earliest entry if it is due at `nowMs` (atMs <= nowMs), removed; undefined otherwise. */
  popDue(nowMs: number): DeadlineEntry<T> | undefined {
    const h = this.heap;
    const top = h[0];
    if (top === undefined || top.atMs > nowMs) return undefined;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let least = i;
        if (l < h.length && before(h[l]!, h[least]!)) least = l;
        if (r < h.length && before(h[r]!, h[least]!)) least = r;
        if (least === i) break;
        [h[i], h[least]] = [h[least]!, h[i]!];
        i = least;
      }
    }
    return top;
  }

  clear(): void {
    this.heap.length = 0;
  }
}

function before<T>(a: DeadlineEntry<T>, b: DeadlineEntry<T>): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
}

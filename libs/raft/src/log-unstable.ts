/**
 * The part of the log not yet persisted: a received snapshot and/or entries
 * from `offset` on (etcd's unstable). Entries move out of here when the
 * caller acknowledges (advance()) that it persisted them.
 */
import { AssertionError, assert } from '@fencer/base';
import type { Entry, Snapshot } from './types.js';

export class Unstable {
  snapshot: Snapshot | undefined = undefined;
  /** entries[i].index === offset + i. */
  entries: Entry[] = [];
  offset: number;

  constructor(offset: number) {
    assert(offset >= 1, `unstable offset must be at least 1, got ${offset}`);
    this.offset = offset;
  }

  /** Index of the first entry when only the snapshot is unstable. */
  maybeFirstIndex(): number | undefined {
    return this.snapshot === undefined ? undefined : this.snapshot.meta.index + 1;
  }

  maybeLastIndex(): number | undefined {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    return this.snapshot === undefined ? undefined : this.snapshot.meta.index;
  }

  maybeTerm(index: number): number | undefined {
    if (index < this.offset) {
      return this.snapshot !== undefined && this.snapshot.meta.index === index ? this.snapshot.meta.term : undefined;
    }
    const e = this.entries[index - this.offset];
    return e === undefined ? undefined : e.term;
  }

  /** The entries up to (index, term) are persisted; a term mismatch means they were overwritten since. */
  stableTo(index: number, term: number): void {
    const t = this.maybeTerm(index);
    if (t === undefined || t !== term || index < this.offset) return;
    this.entries = this.entries.slice(index + 1 - this.offset);
    this.offset = index + 1;
  }

  stableSnapTo(index: number): void {
    if (this.snapshot !== undefined && this.snapshot.meta.index === index) this.snapshot = undefined;
  }

  restore(snapshot: Snapshot): void {
    this.offset = snapshot.meta.index + 1;
    this.entries = [];
    this.snapshot = snapshot;
  }

  /** Appends, replacing any unstable suffix from ents[0].index. The caller checked contiguity with the whole log. */
  truncateAndAppend(ents: readonly Entry[]): void {
    if (ents.length === 0) return;
    const after = (ents[0] as Entry).index;
    if (after === this.offset + this.entries.length) {
      for (const e of ents) this.entries.push(e);
    } else if (after <= this.offset) {
      // Replaces the unstable part and, from `after`, the stable suffix: the
      // next Ready's entries start at `after` and the store overwrites.
      this.offset = after;
      this.entries = ents.slice();
    } else {
      this.entries = this.entries.slice(0, after - this.offset);
      for (const e of ents) this.entries.push(e);
    }
    assert(
      (this.entries[this.entries.length - 1] as Entry).index === this.offset + this.entries.length - 1,
      'unstable entries must be contiguous',
    );
  }

  /** Entries in [lo, hi), all within the unstable part. */
  slice(lo: number, hi: number): Entry[] {
    if (!(lo >= this.offset && hi <= this.offset + this.entries.length && lo <= hi))
      throw new AssertionError(`unstable.slice(${lo}, ${hi}) out of bounds`);
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}

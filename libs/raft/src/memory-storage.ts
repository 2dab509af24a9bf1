/**
 * An in-memory RaftStorage for tests and simple embedding, in the manner of
 * etcd's MemoryStorage. Besides the read view the core uses, it has the
 * write helpers a caller needs to persist a Ready: setHardState, append,
 * applySnapshot, and createSnapshot/compact for log compaction.
 *
 * Layout: `ents[0]` is a dummy entry standing for the snapshot (its index
 * and term), so term(firstIndex()-1) needs no special case.
 */
import { assert, LogIndex, Term } from '@fencer/base';
import { EntryType } from './types.js';
import type { ConfState, Entry, HardState, RaftStorage, Snapshot } from './types.js';
import { emptyConfState } from './conf-change.js';

const emptyData = new Uint8Array(0);

export class MemoryStorage implements RaftStorage {
  private hardState: HardState = { term: Term(0), vote: null, commit: LogIndex(0) };
  private snap: Snapshot;
  /** ents[0].index === snap.meta.index; ents[i].index === ents[0].index + i. */
  private ents: Entry[];

  constructor(init: { conf?: ConfState } = {}) {
    this.snap = { meta: { index: LogIndex(0), term: Term(0), conf: init.conf ?? emptyConfState }, data: emptyData };
    this.ents = [dummy(0, 0)];
  }

  initialState(): { hardState: HardState; conf: ConfState } {
    return { hardState: this.hardState, conf: this.snap.meta.conf };
  }

  entries(lo: LogIndex, hi: LogIndex, maxBytes: number): Entry[] {
    const offset = this.offset();
    assert(lo > offset, `entries(${lo}) is compacted (first index ${offset + 1})`);
    assert(hi <= this.lastIndex() + 1, `entries(.., ${hi}) is past the last index ${this.lastIndex()}`);
    assert(lo <= hi, `entries(${lo}, ${hi}) is an inverted range`);
    return limitBytes(this.ents, lo - offset, hi - offset, maxBytes);
  }

  term(index: LogIndex): Term {
    const offset = this.offset();
    assert(index >= offset && index <= this.lastIndex(), `term(${index}) outside [${offset}, ${this.lastIndex()}]`);
    return (this.ents[index - offset] as Entry).term;
  }

  firstIndex(): LogIndex {
    return LogIndex(this.offset() + 1);
  }

  lastIndex(): LogIndex {
    return LogIndex(this.offset() + this.ents.length - 1);
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  setHardState(hardState: HardState): void {
    assert(hardState.term >= this.hardState.term, `hard state term went back from ${this.hardState.term} to ${hardState.term}`);
    this.hardState = hardState;
  }

  /**
   * Appends entries; a first index at or below lastIndex() replaces the
   * suffix from there. Entries already compacted are skipped.
   */
  append(entries: readonly Entry[]): void {
    if (entries.length === 0) return;
    const first = this.firstIndex();
    const firstNew = (entries[0] as Entry).index;
    const lastNew = firstNew + entries.length - 1;
    if (lastNew < first) return;
    assert(firstNew <= this.lastIndex() + 1, `append at ${firstNew} leaves a gap after ${this.lastIndex()}`);
    const from = first > firstNew ? first - firstNew : 0;
    const keep = (from === 0 ? firstNew : first) - this.offset();
    this.ents.length = keep;
    for (let i = from; i < entries.length; i++) {
      const e = entries[i] as Entry;
      assert(e.index === this.offset() + this.ents.length, `entries to append must be contiguous at ${e.index}`);
      this.ents.push(e);
    }
  }

  /** Replaces the whole log by a snapshot newer than the current one (a snapshot received from the leader). */
  applySnapshot(snapshot: Snapshot): void {
    assert(
      snapshot.meta.index >= this.snap.meta.index,
      `snapshot ${snapshot.meta.index} is older than the stored one ${this.snap.meta.index}`,
    );
    this.snap = snapshot;
    this.ents = [dummy(snapshot.meta.index, snapshot.meta.term)];
  }

  /**
   * Records a snapshot the state machine took at `index` (at or below the
   * last index), keeping the log; call compact() to drop entries below it.
   */
  createSnapshot(index: LogIndex, conf: ConfState, data: Uint8Array): Snapshot {
    assert(index > this.snap.meta.index, `snapshot ${index} is not newer than ${this.snap.meta.index}`);
    assert(index <= this.lastIndex(), `snapshot ${index} is past the last index ${this.lastIndex()}`);
    this.snap = { meta: { index, term: this.term(index), conf }, data };
    return this.snap;
  }

  /** Drops entries at and below `index`, which must be covered by the snapshot. */
  compact(index: LogIndex): void {
    const offset = this.offset();
    if (index <= offset) return;
    assert(index <= this.snap.meta.index, `compact(${index}) beyond the snapshot ${this.snap.meta.index}: its entries would be lost`);
    assert(index <= this.lastIndex(), `compact(${index}) past the last index ${this.lastIndex()}`);
    const at = this.ents[index - offset] as Entry;
    this.ents = [dummy(at.index, at.term), ...this.ents.slice(index - offset + 1)];
  }

  private offset(): number {
    return (this.ents[0] as Entry).index;
  }
}

function dummy(index: number, term: number): Entry {
  return { index: LogIndex(index), term: Term(term), type: EntryType.Normal, data: emptyData };
}

/** ents[lo, hi) with at least one entry, then entries while the data total stays within maxBytes. */
export function limitBytes(ents: readonly Entry[], lo: number, hi: number, maxBytes: number): Entry[] {
  if (lo >= hi) return [];
  let bytes = (ents[lo] as Entry).data.byteLength;
  let end = lo + 1;
  while (end < hi) {
    bytes += (ents[end] as Entry).data.byteLength;
    if (bytes > maxBytes) break;
    end++;
  }
  return ents.slice(lo, end);
}

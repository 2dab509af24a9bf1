/**
 * The core's view of the log (etcd's raftLog): what storage holds durably,
 * plus the unstable tail and snapshot not yet persisted, plus the commit
 * and apply cursors.
 *
 * Invariants: firstIndex()-1 <= applied <= committed <= lastIndex(), and
 * storage holds every entry in [firstIndex(), unstable.offset).
 */
import { AssertionError, assert } from '@fencer/base';
import type { Entry, RaftStorage, Snapshot } from './types.js';
import { Unstable } from './log-unstable.js';

export class RaftLog {
  readonly unstable: Unstable;
  committed: number;
  applied: number;
  /** Called with every run of entries that enters the log (leader appends and follower appends alike). */
  onAppend: (ents: readonly Entry[]) => void = () => {};

  constructor(readonly storage: RaftStorage) {
    const first = storage.firstIndex();
    const last = storage.lastIndex();
    assert(first >= 1 && last >= first - 1, `storage bounds [${first}, ${last}] are broken`);
    this.unstable = new Unstable(last + 1);
    this.committed = first - 1;
    this.applied = first - 1;
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  lastTerm(): number {
    const t = this.term(this.lastIndex());
    assert(t !== undefined, 'the last entry always has a known term');
    return t;
  }

  /** Term at index, or undefined when the index is compacted or past the end. */
  term(index: number): number | undefined {
    const dummyIndex = this.firstIndex() - 1;
    if (index < dummyIndex || index > this.lastIndex()) return undefined;
    const t = this.unstable.maybeTerm(index);
    if (t !== undefined) return t;
    if (index < this.storage.firstIndex() - 1 || index > this.storage.lastIndex()) return undefined;
    return this.storage.term(index as never);
  }

  matchTerm(index: number, term: number): boolean {
    const t = this.term(index);
    return t !== undefined && t === term;
  }

  /** §5.4.1: a log is at least as up-to-date when its last term is higher, or equal with an index at least as long. */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex());
  }

  /** Index of the first entry of `ents` whose term differs from ours (or that we lack); 0 when all match. */
  findConflict(ents: readonly Entry[]): number {
    for (const e of ents) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * Fast backtracking: the largest index <= `index` whose term is <= `term`,
   * with its term. Entries in between cannot match a log whose entry at
   * `index` has `term`, so a whole term's run is skipped in one round trip.
   * An unknown (compacted) term gives that index with term 0.
   */
  findConflictByTerm(index: number, term: number): [number, number] {
    for (; index > 0; index--) {
      const ours = this.term(index);
      if (ours === undefined) return [index, 0];
      if (ours <= term) return [index, ours];
    }
    return [0, 0];
  }

  /**
   * Follower side of AppendEntries (Figure 2, receiver rules 2–5): returns
   * the last index of the new entries when (index, logTerm) matches, else
   * undefined. Conflicting entries and all that follow are replaced.
   */
  maybeAppend(index: number, logTerm: number, leaderCommit: number, ents: readonly Entry[]): number | undefined {
    if (!this.matchTerm(index, logTerm)) return undefined;
    const lastNew = index + ents.length;
    const conflict = this.findConflict(ents);
    if (conflict !== 0) {
      if (!(conflict > this.committed))
        throw new AssertionError(`entry ${conflict} conflicts with the committed prefix (commit ${this.committed})`);
      this.append(ents.slice(conflict - (index + 1)));
    }
    this.commitTo(Math.min(leaderCommit, lastNew));
    return lastNew;
  }

  append(ents: readonly Entry[]): number {
    if (ents.length === 0) return this.lastIndex();
    const after = (ents[0] as Entry).index - 1;
    if (!(after >= this.committed))
      throw new AssertionError(`append after ${after} would overwrite committed entries (commit ${this.committed})`);
    if (!(after <= this.lastIndex())) throw new AssertionError(`append after ${after} leaves a gap past ${this.lastIndex()}`);
    this.unstable.truncateAndAppend(ents);
    this.onAppend(ents);
    return this.lastIndex();
  }

  commitTo(index: number): void {
    if (index <= this.committed) return;
    if (!(index <= this.lastIndex()))
      throw new AssertionError(`commit ${index} is past the last index ${this.lastIndex()}: the log was lost or truncated`);
    this.committed = index;
  }

  appliedTo(index: number): void {
    if (index === 0) return;
    if (!(index <= this.committed && index >= this.applied))
      throw new AssertionError(`applied ${index} outside [${this.applied}, ${this.committed}]`);
    this.applied = index;
  }

  stableTo(index: number, term: number): void {
    this.unstable.stableTo(index, term);
  }

  stableSnapTo(index: number): void {
    this.unstable.stableSnapTo(index);
  }

  /** Last index known to be durable (0 while a received snapshot awaits persistence). */
  stableLastIndex(): number {
    return this.unstable.snapshot !== undefined ? 0 : this.unstable.offset - 1;
  }

  hasPendingSnapshot(): boolean {
    return this.unstable.snapshot !== undefined;
  }

  /** Committed entries not yet applied exist (and no snapshot must be installed first). */
  hasNextCommittedEntries(): boolean {
    if (this.hasPendingSnapshot()) return false;
    return this.committed > Math.max(this.applied, this.firstIndex() - 1);
  }

  nextCommittedEntries(maxBytes: number): Entry[] {
    if (!this.hasNextCommittedEntries()) return [];
    const lo = Math.max(this.applied + 1, this.firstIndex());
    const ents = this.slice(lo, this.committed + 1, maxBytes);
    assert(ents !== undefined, 'committed entries above applied are never compacted');
    return ents;
  }

  /** Up to maxCount entries from lo on, within maxBytes (at least one); undefined when lo is compacted. */
  entriesFrom(lo: number, maxBytes: number, maxCount: number): Entry[] | undefined {
    const last = this.lastIndex();
    if (lo > last) return [];
    return this.slice(lo, Math.min(last + 1, lo + maxCount), maxBytes);
  }

  /** Entries in [lo, hi), at least one, within maxBytes; undefined when lo is compacted. */
  slice(lo: number, hi: number, maxBytes: number): Entry[] | undefined {
    // Assertions on this path build their message only when they fail (it runs per message).
    if (!(lo <= hi && hi <= this.lastIndex() + 1)) throw new AssertionError(`slice(${lo}, ${hi}) out of bounds (last ${this.lastIndex()})`);
    if (lo < this.firstIndex()) return undefined;
    if (lo === hi) return [];
    const offset = this.unstable.offset;
    let out: Entry[] = [];
    let bytes = 0;
    if (lo < offset) {
      const storedHi = Math.min(hi, offset);
      const stored = this.storage.entries(lo as never, storedHi as never, maxBytes);
      if (!(stored.length > 0 && (stored[0] as Entry).index === lo)) throw new AssertionError(`storage returned no entries at ${lo}`);
      if (stored.length < storedHi - lo || hi <= offset) return stored;
      // Copied because unstable entries follow and storage may hand out its own array.
      out = stored.slice();
      for (const e of out) bytes += e.data.byteLength;
    }
    if (hi > offset) {
      const from = Math.max(lo, offset);
      for (let i = from; i < hi; i++) {
        const e = this.unstable.entries[i - offset] as Entry;
        bytes += e.data.byteLength;
        if (out.length > 0 && bytes > maxBytes) break;
        out.push(e);
      }
    }
    return out;
  }

  snapshot(): Snapshot {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }

  /** Installs a snapshot received from the leader: the whole log is replaced and everything in it is committed. */
  restore(snapshot: Snapshot): void {
    assert(snapshot.meta.index > this.committed, `restoring snapshot ${snapshot.meta.index} at or below commit ${this.committed}`);
    this.committed = snapshot.meta.index;
    this.unstable.restore(snapshot);
  }
}

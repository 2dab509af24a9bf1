/**
 * Goal: the core's log view (storage + unstable tail) answers terms and
 * slices correctly across the stable/unstable boundary, appends and
 * truncates as Figure 2 says, and never lets a committed entry be
 * overwritten.
 * Method: direct cases over a MemoryStorage, advancing entries from
 * unstable to stable as a caller's persistence would.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError, LogIndex, NodeId, Term } from '@fencer/base';
import { MemoryStorage } from './memory-storage.js';
import { RaftLog } from './raft-log.js';
import { EntryType, type Entry } from './types.js';

const ent = (index: number, term: number, size = 0): Entry => ({
  index: LogIndex(index),
  term: Term(term),
  type: EntryType.Normal,
  data: new Uint8Array(size),
});

function logWithStable(terms: number[]): { log: RaftLog; storage: MemoryStorage } {
  const storage = new MemoryStorage();
  storage.append(terms.map((t, i) => ent(i + 1, t)));
  return { log: new RaftLog(storage), storage };
}

describe('RaftLog', () => {
  it('reads terms and slices across stable and unstable entries, within a byte limit', () => {
    const { log } = logWithStable([1, 1]);
    log.append([ent(3, 2, 10), ent(4, 2, 10)]);
    expect([log.lastIndex(), log.term(2), log.term(4), log.term(5)]).toEqual([4, 1, 2, undefined]);
    expect(log.slice(1, 5, 1000)?.map((e) => e.index)).toEqual([1, 2, 3, 4]);
    expect(log.slice(2, 5, 15)?.map((e) => e.index)).toEqual([2, 3]);
  });

  it('maybeAppend replaces a conflicting suffix and commits up to the last new entry only', () => {
    const { log } = logWithStable([1, 1, 1]);
    expect(log.maybeAppend(1, 1, 10, [ent(2, 2)])).toBe(2);
    expect([log.lastIndex(), log.term(2), log.committed]).toEqual([2, 2, 2]);
    expect(log.maybeAppend(5, 1, 10, [])).toBeUndefined();
  });

  it('refuses to overwrite committed entries (an assertion: it would mean a broken leader)', () => {
    const { log } = logWithStable([1, 1, 1]);
    log.commitTo(3);
    expect(() => log.maybeAppend(1, 1, 3, [ent(2, 2)])).toThrow(AssertionError);
  });

  it('stableTo moves entries out of unstable only if they were not overwritten meanwhile', () => {
    const { log, storage } = logWithStable([1]);
    log.append([ent(2, 1), ent(3, 1)]);
    const handedOut = [...log.unstable.entries];
    log.append([ent(3, 2)]);
    storage.append(handedOut);
    log.stableTo(3, 1);
    expect(log.unstable.offset).toBe(2);
    storage.append([ent(3, 2)]);
    log.stableTo(3, 2);
    expect([log.unstable.offset, log.unstable.entries.length, log.stableLastIndex()]).toEqual([4, 0, 3]);
  });

  it('findConflictByTerm skips a whole run of a later term', () => {
    const { log } = logWithStable([1, 2, 2, 2, 5, 5]);
    expect(log.findConflictByTerm(6, 3)).toEqual([4, 2]);
    expect(log.findConflictByTerm(6, 1)).toEqual([1, 1]);
    expect(log.findConflictByTerm(6, 0)).toEqual([0, 0]);
  });

  it('restore makes the snapshot the whole log and hides committed entries until it is installed', () => {
    const { log } = logWithStable([1, 1]);
    log.restore({ meta: { index: LogIndex(9), term: Term(3), conf: { voters: [NodeId('a')], learners: [] } }, data: new Uint8Array(0) });
    expect([log.firstIndex(), log.lastIndex(), log.term(9), log.committed, log.hasNextCommittedEntries()]).toEqual([10, 9, 3, 9, false]);
  });

  it('is up-to-date by last term first, then by length (§5.4.1)', () => {
    const { log } = logWithStable([1, 2, 2]);
    expect([log.isUpToDate(1, 3), log.isUpToDate(3, 2), log.isUpToDate(2, 2), log.isUpToDate(9, 1)]).toEqual([true, true, false, false]);
  });
});

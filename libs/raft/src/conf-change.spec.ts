/**
 * Goal: membership changes encode and decode losslessly, apply as
 * absolute assignments (so replaying them is harmless), and the history
 * follows appends, truncations, snapshots and compaction.
 * Method: direct cases, and a fast-check check that replaying any suffix
 * of a change sequence on a configuration already reflecting it changes
 * nothing.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AssertionError, LogIndex, NodeId, Term } from '@fencer/base';
import { applyConfChange, decodeConfChange, encodeConfChange } from './conf-change.js';
import { ConfHistory } from './conf-history.js';
import { ConfChangeType, EntryType, type ConfChange, type ConfState, type Entry } from './types.js';

const cc = (type: ConfChangeType, node: string): ConfChange => ({ type, node: NodeId(node) });
const entry = (index: number, change: ConfChange): Entry => ({
  index: LogIndex(index),
  term: Term(1),
  type: EntryType.ConfChange,
  data: encodeConfChange(change),
});
const base: ConfState = { voters: ['a', 'b'].map(NodeId), learners: [] };

describe('ConfChange', () => {
  it('round-trips through its encoding, including non-ASCII ids, and rejects garbage', () => {
    for (const c of [cc(ConfChangeType.AddVoter, 'node-7'), cc(ConfChangeType.RemoveNode, 'nœud-é'), cc(ConfChangeType.AddLearner, 'x')]) {
      expect(decodeConfChange(encodeConfChange(c))).toEqual(c);
    }
    expect(() => decodeConfChange(Uint8Array.of(9, 0, 65))).toThrow(AssertionError);
    expect(() => decodeConfChange(Uint8Array.of(1, 7, 65))).toThrow(AssertionError);
  });

  it('AddLearner demotes a voter, AddVoter promotes a learner, RemoveNode removes either', () => {
    let c = applyConfChange(base, cc(ConfChangeType.AddLearner, 'a'));
    expect(c).toEqual({ voters: ['b'], learners: ['a'] });
    c = applyConfChange(c, cc(ConfChangeType.AddVoter, 'a'));
    expect(c).toEqual({ voters: ['a', 'b'], learners: [] });
    expect(applyConfChange(c, cc(ConfChangeType.RemoveNode, 'b'))).toEqual({ voters: ['a'], learners: [] });
  });

  it('replaying any suffix of applied changes changes nothing (so a restart may rescan the log safely)', () => {
    const change = fc.record({
      type: fc.constantFrom(0, 1, 2) as fc.Arbitrary<ConfChangeType>,
      node: fc.constantFrom('a', 'b', 'c', 'd').map(NodeId),
    });
    fc.assert(
      fc.property(fc.array(change, { maxLength: 12 }), fc.nat(12), (changes, from) => {
        const all = changes.reduce(applyConfChange, base);
        const again = changes.slice(Math.min(from, changes.length)).reduce(applyConfChange, all);
        expect(again).toEqual(all);
      }),
    );
  });
});

describe('ConfHistory', () => {
  it('follows appends, rolls back on truncation, answers at an index, folds on compaction', () => {
    const h = new ConfHistory(0, base);
    h.onAppend([entry(1, cc(ConfChangeType.AddVoter, 'c')), entry(2, cc(ConfChangeType.AddLearner, 'd'))]);
    expect(h.current()).toEqual({ voters: ['a', 'b', 'c'], learners: ['d'] });
    expect(h.at(1)).toEqual({ voters: ['a', 'b', 'c'], learners: [] });
    h.onAppend([{ index: LogIndex(2), term: Term(2), type: EntryType.Normal, data: new Uint8Array(0) }]);
    expect(h.current()).toEqual({ voters: ['a', 'b', 'c'], learners: [] });
    h.compact(1);
    expect([h.currentIndex(), h.at(1)]).toEqual([1, { voters: ['a', 'b', 'c'], learners: [] }]);
    expect(() => h.at(0)).toThrow(AssertionError);
  });

  it('a restored snapshot takes over from its index, keeping what was in force up to the old commit index', () => {
    const h = new ConfHistory(0, base);
    h.onAppend([entry(1, cc(ConfChangeType.AddVoter, 'c')), entry(3, cc(ConfChangeType.AddVoter, 'x'))]);
    const fromSnapshot = { voters: ['a', 'b', 'c', 'd'].map(NodeId), learners: [] };
    h.restore(9, fromSnapshot, 2);
    expect(h.at(1)).toEqual({ voters: ['a', 'b', 'c'], learners: [] });
    expect([h.current(), h.currentIndex()]).toEqual([fromSnapshot, 9]);
    h.onAppend([entry(10, cc(ConfChangeType.RemoveNode, 'd'))]);
    expect(h.at(9)).toEqual(fromSnapshot);
    expect(h.current().voters).toEqual(['a', 'b', 'c']);
  });
});

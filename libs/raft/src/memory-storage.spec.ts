/**
 * Goal: MemoryStorage keeps the log the core and tests rely on: appends
 * overwrite a suffix, compaction keeps the snapshot's index and term
 * readable, entries() honours its byte limit (but returns at least one).
 * Method: direct cases, and a fast-check model test of append/compact
 * against a plain array.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AssertionError, LogIndex, NodeId, Term } from '@fencer/base';
import { MemoryStorage } from './memory-storage.js';
import { EntryType, type Entry } from './types.js';

const ent = (index: number, term: number, size = 0): Entry => ({
  index: LogIndex(index),
  term: Term(term),
  type: EntryType.Normal,
  data: new Uint8Array(size),
});
const conf = { voters: [NodeId('a')], learners: [] };

describe('MemoryStorage', () => {
  it('starts empty with a zero snapshot', () => {
    const s = new MemoryStorage({ conf });
    expect([s.firstIndex(), s.lastIndex(), s.term(LogIndex(0))]).toEqual([1, 0, 0]);
    expect(s.initialState().conf).toBe(conf);
  });

  it('append overwrites a conflicting suffix and refuses a gap', () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 1), ent(3, 1)]);
    s.append([ent(2, 2)]);
    expect([s.lastIndex(), s.term(LogIndex(2))]).toEqual([2, 2]);
    expect(() => s.append([ent(5, 2)])).toThrow(AssertionError);
  });

  it('entries() stops before maxBytes is exceeded but always returns one entry', () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1, 100), ent(2, 1, 100), ent(3, 1, 100)]);
    expect(s.entries(LogIndex(1), LogIndex(4), 250).map((e) => e.index)).toEqual([1, 2]);
    expect(s.entries(LogIndex(1), LogIndex(4), 10).map((e) => e.index)).toEqual([1]);
  });

  it('compact keeps the term at the snapshot index and refuses to drop entries no snapshot covers', () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 2), ent(3, 3)]);
    expect(() => s.compact(LogIndex(2))).toThrow(AssertionError);
    s.createSnapshot(LogIndex(2), conf, Uint8Array.of(9));
    s.compact(LogIndex(2));
    expect([s.firstIndex(), s.lastIndex(), s.term(LogIndex(2))]).toEqual([3, 3, 2]);
    expect(() => s.entries(LogIndex(2), LogIndex(3), 100)).toThrow(AssertionError);
  });

  it('applySnapshot replaces the whole log', () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 1)]);
    s.applySnapshot({ meta: { index: LogIndex(10), term: Term(4), conf }, data: new Uint8Array(0) });
    expect([s.firstIndex(), s.lastIndex(), s.term(LogIndex(10))]).toEqual([11, 10, 4]);
    s.append([ent(11, 4)]);
    expect(s.lastIndex()).toBe(11);
  });

  it('matches a plain-array model under random appends and compactions', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              kind: fc.constant('append' as const),
              at: fc.nat(20),
              n: fc.integer({ min: 1, max: 5 }),
              term: fc.integer({ min: 1, max: 9 }),
            }),
            fc.record({ kind: fc.constant('compact' as const), at: fc.nat(20) }),
          ),
          { maxLength: 40 },
        ),
        (ops) => {
          const s = new MemoryStorage();
          const model: number[] = []; // model[i] = term of index i+1
          let compacted = 0;
          for (const op of ops) {
            if (op.kind === 'append') {
              const first = Math.max(compacted + 1, Math.min(op.at + 1, model.length + 1));
              const ents = Array.from({ length: op.n }, (_, i) => ent(first + i, op.term));
              s.append(ents);
              model.length = first - 1;
              for (const e of ents) model.push(e.term);
            } else {
              const at = Math.min(op.at, model.length);
              if (at <= compacted) continue;
              s.createSnapshot(LogIndex(at), conf, new Uint8Array(0));
              s.compact(LogIndex(at));
              compacted = at;
            }
            expect(s.lastIndex()).toBe(model.length);
            expect(s.firstIndex()).toBe(compacted + 1);
            for (let i = compacted + 1; i <= model.length; i++) expect(s.term(LogIndex(i))).toBe(model[i - 1]);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

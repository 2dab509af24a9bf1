/**
 * Goal: the checkers other than the lock search accept correct histories and
 * flag the failures they exist for: a token that goes backwards in real time,
 * a stale revision, a lost update and a decreasing token at the resource, a
 * watch stream with a gap, a duplicate, a reordering or a wrong snapshot, and
 * an acknowledged grant missing from the final log.
 * Method: small hand-built histories, resource logs and canonical logs.
 */
import { describe, expect, it } from 'vitest';
import type { History, Op, OpArgs, OpResult, WatchSegment } from '../src/history.js';
import { checkTokens } from '../src/check/tokens.js';
import { checkResource } from '../src/check/resource-check.js';
import { type CanonicalLog, checkWatches } from '../src/check/watch-check.js';
import { checkGrantsInLog } from '../src/check/log-check.js';
import type { ResourceState } from '../src/resource.js';
import type { CanonicalEvent } from '../src/final-log.js';

let nextId = 0;
function op(inv: number, comp: number, a: OpArgs, r: OpResult): Op {
  return { p: 'w', id: ++nextId, inv, comp, op: a, outcome: 'ok', r };
}
const grant = (s: string, name: string, inv: number, comp: number, token: number, mode: 'X' | 'S' = 'X'): Op =>
  op(inv, comp, { f: 'acquire', s, name, mode, wait: 0, req: `r${nextId}` }, { f: 'acquire', status: 'GRANTED', token, rev: token });
const read = (name: string, inv: number, comp: number, rev: number): Op =>
  op(inv, comp, { f: 'get', name }, { f: 'get', rev, holders: [], waiters: [] });
const history = (ops: Op[], watches: Array<{ p: string; seg: WatchSegment }> = []): History => ({
  ops,
  sessions: new Map(),
  watches,
  badLines: 0,
});

describe('tokens and revisions in real time', () => {
  it('accepts increasing tokens and reads that never go back', () => {
    const r = checkTokens(
      history([grant('A', '/ls/t/a', 0, 10, 5), read('/ls/t/b', 11, 12, 5), grant('B', '/ls/t/a', 20, 30, 9), read('/ls/t/a', 31, 32, 9)]),
    );
    expect(r.violationCount).toBe(0);
  });

  it('flags a grant whose token is not above one answered before it was asked for', () => {
    const r = checkTokens(history([grant('A', '/ls/t/a', 0, 10, 9), grant('B', '/ls/t/a', 20, 30, 7)]));
    expect(r.violationCount).toBeGreaterThan(0);
  });

  it('flags an exclusive token shared by two sessions, and a read older than a write that completed before it', () => {
    expect(checkTokens(history([grant('A', '/ls/t/a', 0, 10, 9), grant('B', '/ls/t/a', 5, 12, 9)])).violationCount).toBeGreaterThan(0);
    expect(checkTokens(history([grant('A', '/ls/t/a', 0, 10, 9), read('/ls/t/z', 20, 25, 8)])).violationCount).toBe(1);
  });

  it('with a revision scope per namespace (two cells), compares revisions only within a namespace', () => {
    const byNamespace = (name: string): string => name.split('/')[2]!;
    const twoCells = history([grant('A', '/ls/t/a', 0, 10, 9), read('/ls/u/z', 20, 25, 8)]);
    expect(checkTokens(twoCells, byNamespace).violationCount).toBe(0);
    const sameNamespace = history([grant('A', '/ls/t/a', 0, 10, 9), read('/ls/t/z', 20, 25, 8)]);
    expect(checkTokens(sameNamespace, byNamespace).violationCount).toBe(1);
  });
});

describe('resource', () => {
  const write = (name: string, token: number, accepted: boolean): Op =>
    op(0, 1, { f: 'ctr-write', name, token, value: 0 }, { f: 'ctr-write', accepted });

  it('accepts a counter equal to the acknowledged increments with tokens that only grow', () => {
    const state: ResourceState = {
      fence: true,
      counters: { c: 2 },
      log: [
        { op: 'read', name: 'c', token: 3, accepted: true, value: 0 },
        { op: 'write', name: 'c', token: 3, accepted: true, value: 1 },
        { op: 'write', name: 'c', token: 2, accepted: false, value: 1 },
        { op: 'write', name: 'c', token: 8, accepted: true, value: 2 },
      ],
    };
    const r = checkResource(history([write('c', 3, true), write('c', 2, false), write('c', 8, true)]), state);
    expect(r.violationCount).toBe(0);
    expect(r.acceptedWrites).toBe(2);
  });

  it('flags a lost update and an accepted token below an earlier one (what an unfenced resource does)', () => {
    const state: ResourceState = {
      fence: false,
      counters: { c: 1 },
      log: [
        { op: 'write', name: 'c', token: 8, accepted: true, value: 1 },
        { op: 'write', name: 'c', token: 3, accepted: true, value: 1 },
      ],
    };
    const r = checkResource(history([write('c', 8, true), write('c', 3, true)]), state);
    expect(r.violations.some((v) => v.includes('lost update'))).toBe(true);
    expect(r.violations.some((v) => v.includes('accepted a write with token 3 after token 8'))).toBe(true);
  });
});

describe('watch streams against the log', () => {
  const events = new Map<number, CanonicalEvent[]>([
    [3, [['ACQUIRED', '/ls/t/a', 'A', 3]]],
    [4, [['QUEUED', '/ls/t/a', 'B', 0]]],
    [
      6,
      [
        ['RELEASED', '/ls/t/a', 'A', 3],
        ['ACQUIRED', '/ls/t/a', 'B', 6],
      ],
    ],
    [7, [['ACQUIRED', '/ls/u/x', 'C', 7]]],
  ]);
  const log: CanonicalLog = {
    floor: 1,
    last: 10,
    events,
    snapshots: new Map([
      ['2 /ls/t/', new Map()],
      ['4 /ls/t/', new Map([['/ls/t/a', 'A@3/X|B/X/r1']])],
    ]),
  };
  const seg = (since: number, ev: WatchSegment['events'], end = 'cancelled'): { p: string; seg: WatchSegment } => ({
    p: 'w',
    seg: { prefix: '/ls/t/', endpoint: 0, since, tStart: 0, tEnd: 1, events: ev, end },
  });
  const all: WatchSegment['events'] = [
    [3, 'ACQUIRED', '/ls/t/a', 'A', 3],
    [4, 'QUEUED', '/ls/t/a', 'B', 0],
    [6, 'RELEASED', '/ls/t/a', 'A', 3],
    [6, 'ACQUIRED', '/ls/t/a', 'B', 6],
    [8, 'PROGRESS', '', '', 0],
  ];

  it('accepts complete streams, resumptions from any revision, a stream cut inside a revision, and a matching snapshot', () => {
    const r = checkWatches(
      [
        seg(2, all),
        seg(3, all.slice(1)),
        seg(5, all.slice(2)),
        seg(2, all.slice(0, 3)), // ended between the two events of revision 6
        seg(0, [[4, 'SNAPSHOT', '/ls/t/a', 'A@3/X|B/X/r1', 0], [4, 'PROGRESS', '', '', 0], ...all.slice(2)]),
        seg(9, [], 'COMPACTED'),
      ],
      log,
    );
    expect(r.violations).toEqual([]);
    expect(r.snapshotsCompared).toBe(1);
  });

  it('flags a gap, a duplicate, a reordering, an event at or before since, and a wrong snapshot', () => {
    const gap = checkWatches([seg(2, [all[0]!, all[2]!, all[3]!, all[4]!])], log);
    expect(gap.violationCount).toBeGreaterThan(0);
    const dup = checkWatches([seg(2, [all[0]!, all[1]!, all[1]!, all[2]!, all[3]!])], log);
    expect(dup.violationCount).toBeGreaterThan(0);
    const reorder = checkWatches([seg(2, [all[1]!, all[0]!, all[2]!, all[3]!])], log);
    expect(reorder.violationCount).toBeGreaterThan(0);
    const early = checkWatches([seg(4, all)], log);
    expect(early.violationCount).toBeGreaterThan(0);
    const snap = checkWatches(
      [
        seg(0, [
          [4, 'SNAPSHOT', '/ls/t/a', 'A@3/X|', 0],
          [4, 'PROGRESS', '', '', 0],
        ]),
      ],
      log,
    );
    expect(snap.violationCount).toBe(1);
  });

  it('flags a PROGRESS that vouches for a revision whose event never came', () => {
    const r = checkWatches([seg(2, [all[0]!, [5, 'PROGRESS', '', '', 0]])], log);
    expect(r.violationCount).toBe(1);
  });
});

describe('acknowledged grants in the final log', () => {
  const log: CanonicalLog = {
    floor: 3,
    last: 20,
    events: new Map([[5, [['ACQUIRED', '/ls/t/a', 'A', 5] as const]]]),
    snapshots: new Map(),
  };

  it('finds a grant at its revision, counts one below the floor as compacted', () => {
    const r = checkGrantsInLog(history([grant('A', '/ls/t/a', 0, 1, 5), grant('B', '/ls/t/b', 0, 1, 2)]), log);
    expect(r.violationCount).toBe(0);
    expect(r.checked).toBe(1);
    expect(r.compacted).toBe(1);
  });

  it('flags a grant the log does not have at that revision, or past the final commit', () => {
    expect(checkGrantsInLog(history([grant('B', '/ls/t/a', 0, 1, 5)]), log).violationCount).toBe(1);
    expect(checkGrantsInLog(history([grant('A', '/ls/t/a', 0, 1, 21)]), log).violationCount).toBe(1);
  });
});

/**
 * Goal: the two internal structures of the apply path keep their contracts.
 * DedupeTable (a ring of the last `max` request outcomes with an
 * open-addressing index) finds exactly the ids a plain list of the last
 * `max` would, in the same arrival order; a session's list of locks, which
 * drops departing locks lazily, always names exactly the locks the session
 * holds or awaits.
 * Method: fast-check command sequences against a reference list for the
 * table (small maxima and index sizes so that probe chains, wrap-around and
 * backward-shift deletion all happen); for the session list, long histories
 * of acquires, releases, re-acquires and cancels through the real entry path
 * with one session holding far more than the removal window, checking the
 * state machine's invariants and `locksOf` against a model after every step.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SeededRandom, type SessionId } from '@fencer/base';
import { Cell } from '../test/harness.js';
import type { LockEvent } from './index.js';
import {
  dedupeHash,
  DedupeTable,
  REASON_CANCELLED,
  REASON_NONE,
  REASON_TIMED_OUT,
  STATUS_GRANTED,
  STATUS_QUEUED,
  STATUS_TIMED_OUT,
} from './dedupe.js';

interface RefRecord {
  id: string;
  status: number;
  name: string;
  token: number;
  revision: number;
  reason: number;
}

type TableOp =
  { t: 'add'; id: number; status: number; token: number } | { t: 'find'; id: number } | { t: 'settle'; pick: number; granted: boolean };

const tableOp: fc.Arbitrary<TableOp> = fc.oneof(
  fc.record({
    t: fc.constant('add' as const),
    id: fc.nat(40),
    status: fc.constantFrom(STATUS_GRANTED, STATUS_QUEUED, STATUS_TIMED_OUT),
    token: fc.nat(2 ** 40),
  }),
  fc.record({ t: fc.constant('find' as const), id: fc.nat(40) }),
  fc.record({ t: fc.constant('settle' as const), pick: fc.nat(100), granted: fc.boolean() }),
);

/** Ids that share prefixes and lengths, like real request ids; one is long and one is not ASCII. */
function idOf(n: number): string {
  if (n === 40) return 'req-'.padEnd(120, 'x');
  if (n === 39) return 'requête-é';
  return `req-${n}`;
}

describe('DedupeTable', () => {
  it('matches a list of the last max request ids (fast-check)', () => {
    fc.assert(
      fc.property(fc.constantFrom(1, 2, 3, 4, 5, 7, 8, 9, 16, 64), fc.array(tableOp, { maxLength: 300 }), (max, ops) => {
        const table = new DedupeTable(max);
        const ref: RefRecord[] = [];
        let revision = 0;
        for (const op of ops) {
          revision++;
          if (op.t === 'add') {
            const id = idOf(op.id);
            if (ref.some((r) => r.id === id)) continue; // callers look an id up before adding it
            const reason = op.status === STATUS_TIMED_OUT ? REASON_TIMED_OUT : REASON_NONE;
            const token = op.status === STATUS_GRANTED ? op.token : 0;
            table.add(id, dedupeHash(id), op.status, `/ls/ns/${op.id}`, token, revision, reason);
            ref.push({ id, status: op.status, name: `/ls/ns/${op.id}`, token, revision, reason });
            if (ref.length > max) ref.shift();
          } else if (op.t === 'find') {
            const id = idOf(op.id);
            const slot = table.find(id, dedupeHash(id));
            const expected = ref.find((r) => r.id === id);
            expect(slot >= 0).toBe(expected !== undefined);
            if (expected !== undefined) {
              expect(table.requestIdAt(slot)).toBe(id);
              expect(table.nameAt(slot)).toBe(expected.name);
              expect(table.statusCodeAt(slot)).toBe(expected.status);
              expect(table.tokenAt(slot)).toBe(expected.token);
              expect(table.revisionAt(slot)).toBe(expected.revision);
              expect(table.reasonCodeAt(slot)).toBe(expected.reason);
            }
          } else if (ref.length > 0) {
            const r = ref[op.pick % ref.length] as RefRecord;
            const slot = table.find(r.id, dedupeHash(r.id));
            r.status = op.granted ? STATUS_GRANTED : STATUS_TIMED_OUT;
            r.token = op.granted ? revision : r.token;
            r.revision = revision;
            r.reason = op.granted ? REASON_NONE : REASON_CANCELLED;
            table.settle(slot, r.status, r.token, r.revision, r.reason);
          }
          expect(table.size).toBe(ref.length);
        }
        table.check();
        const order: string[] = [];
        for (let k = 0; k < table.size; k++) order.push(table.requestIdAt(table.slotInArrivalOrder(k)));
        expect(order).toEqual(ref.map((r) => r.id));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps tokens and revisions beyond 2^31 exactly', () => {
    const table = new DedupeTable(4);
    const big = 2 ** 52 + 1;
    const slot = table.add('r', dedupeHash('r'), STATUS_GRANTED, '/ls/ns/x', big, big, REASON_NONE);
    expect(table.tokenAt(slot)).toBe(big);
    expect(table.revisionAt(slot)).toBe(big);
  });
});

describe("a session's list of locks", () => {
  it('names exactly the locks held and awaited through long histories of acquires, releases, re-acquires and cancels', () => {
    const rng = new SeededRandom(20261130);
    const cell = new Cell({ autoClaim: true });
    const [a, b] = [cell.open(), cell.open()];
    // Model: name -> token for each session's holds, name -> request id for its waits.
    const held = new Map<SessionId, Map<string, number>>([
      [a, new Map()],
      [b, new Map()],
    ]);
    const waiting = new Map<SessionId, Map<string, string>>([
      [a, new Map()],
      [b, new Map()],
    ]);
    const names = Array.from({ length: 120 }, (_, i) => `/ls/payments/n${i}`);
    let request = 0;
    let peak = 0;
    const check = () => {
      cell.fsm.checkInvariants();
      for (const s of [a, b]) {
        expect(cell.fsm.locksOf(s)).toEqual({
          held: [...(held.get(s) as Map<string, number>).keys()].sort(),
          waiting: [...(waiting.get(s) as Map<string, string>).keys()].sort(),
        });
      }
    };
    // Waiters granted by a release or cancel move from waiting to held in the model.
    const promoted = (events: readonly LockEvent[]) => {
      for (const e of events) {
        if (e.type !== 'ACQUIRED') continue;
        expect((waiting.get(e.sessionId) as Map<string, string>).delete(e.name)).toBe(true);
        (held.get(e.sessionId) as Map<string, number>).set(e.name, e.token);
      }
    };
    for (let step = 0; step < 1500; step++) {
      const s = rng.int(4) === 0 ? b : a; // a does most of the work, so its list grows far past the removal window
      const other = s === a ? b : a;
      const name = names[rng.int(names.length)] as string;
      const mine = held.get(s) as Map<string, number>;
      const myWaits = waiting.get(s) as Map<string, string>;
      const roll = rng.int(10);
      if (roll < 6 && !mine.has(name) && !myWaits.has(name)) {
        const requestId = `q${++request}`;
        // Shared, so re-acquiring a lock the other session still holds reuses its live record.
        const r = cell.acquire(s, name, { mode: 'SHARED', requestId });
        if (!r.outcome.ok) throw new Error(JSON.stringify(r.outcome));
        if (r.outcome.status === 'GRANTED') mine.set(name, r.outcome.token);
        else myWaits.set(name, requestId);
      } else if (roll < 9 && mine.size > 0) {
        const heldNames = [...mine.keys()];
        const victim = heldNames[rng.int(heldNames.length)] as string;
        const r = cell.release(s, victim, mine.get(victim) as number);
        expect(r.outcome).toMatchObject({ ok: true, released: true });
        mine.delete(victim);
        promoted(r.events);
      } else if (myWaits.size > 0) {
        const [victim, requestId] = [...myWaits.entries()][0] as [string, string];
        const r = cell.cancel(s, victim, requestId);
        expect(r.outcome).toMatchObject({ ok: true, cancelled: true });
        myWaits.delete(victim);
        promoted(r.events);
      } else if (rng.int(3) === 0) {
        // An exclusive holder makes later shared requests of the other session queue.
        const free = names.find(
          (n) =>
            !mine.has(n) &&
            !myWaits.has(n) &&
            !(held.get(other) as Map<string, number>).has(n) &&
            !(waiting.get(other) as Map<string, string>).has(n),
        );
        if (free !== undefined) mine.set(free, cell.grant(s, free));
      }
      if (step % 25 === 0) check();
      peak = Math.max(peak, (held.get(a) as Map<string, number>).size + (waiting.get(a) as Map<string, string>).size);
    }
    check();
    // Far past the removal window (8 from each end) and the size at which compaction switches to a Set (32).
    expect(peak).toBeGreaterThan(40);
    const closed = cell.close(a);
    expect(closed.outcome).toEqual({ ok: true, released: [...(held.get(a) as Map<string, number>).keys()].sort() });
    cell.fsm.checkInvariants();
  });

  it('survives a session that holds many locks and releases them in random order (the load that crashed a cell)', () => {
    // Found by a 64-worker load on one session (2026-11-30): the list compacted
    // before the lock just counted was in it, and the check that the list names
    // every lock the session holds failed inside apply on every replica.
    const rng = new SeededRandom(64);
    const cell = new Cell({ autoClaim: true });
    const s = cell.open();
    const held = new Map<string, number>();
    let next = 0;
    for (let step = 0; step < 20_000; step++) {
      if (held.size < 64 && (held.size === 0 || rng.int(2) === 0)) {
        const name = `/ls/payments/job-${next++}`;
        held.set(name, cell.grant(s, name));
      } else {
        const names = [...held.keys()];
        const victim = names[rng.int(names.length)] as string;
        expect(cell.release(s, victim, held.get(victim) as number).outcome).toMatchObject({ ok: true, released: true });
        held.delete(victim);
      }
      if (step % 500 === 0) {
        cell.fsm.checkInvariants();
        expect(cell.fsm.locksOf(s)?.held).toEqual([...held.keys()].sort());
      }
    }
    expect(cell.close(s).outcome).toEqual({ ok: true, released: [...held.keys()].sort() });
    cell.fsm.checkInvariants();
  });
});

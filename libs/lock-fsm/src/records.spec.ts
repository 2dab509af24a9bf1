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

/** What two sessions hold (name -> token) and await (name -> request id), kept beside a harness cell. */
class TwoSessions {
  private readonly held = new Map<SessionId, Map<string, number>>();
  private readonly waiting = new Map<SessionId, Map<string, string>>();
  private request = 0;

  constructor(
    private readonly cell: Cell,
    readonly a: SessionId,
    readonly b: SessionId,
  ) {
    for (const s of [a, b]) {
      this.held.set(s, new Map());
      this.waiting.set(s, new Map());
    }
  }

  heldBy(s: SessionId): Map<string, number> {
    return this.held.get(s) as Map<string, number>;
  }

  waitsOf(s: SessionId): Map<string, string> {
    return this.waiting.get(s) as Map<string, string>;
  }

  /** The state machine names exactly the locks the model says each session holds and awaits. */
  check(): void {
    this.cell.fsm.checkInvariants();
    for (const s of [this.a, this.b]) {
      expect(this.cell.fsm.locksOf(s)).toEqual({ held: [...this.heldBy(s).keys()].sort(), waiting: [...this.waitsOf(s).keys()].sort() });
    }
  }

  /** Shared, so re-acquiring a lock the other session still holds reuses its live record. */
  acquire(s: SessionId, name: string): void {
    const requestId = `q${++this.request}`;
    const r = this.cell.acquire(s, name, { mode: 'SHARED', requestId });
    if (!r.outcome.ok) throw new Error(JSON.stringify(r.outcome));
    if (r.outcome.status === 'GRANTED') this.heldBy(s).set(name, r.outcome.token);
    else this.waitsOf(s).set(name, requestId);
  }

  releaseOne(s: SessionId, rng: SeededRandom): void {
    const heldNames = [...this.heldBy(s).keys()];
    const victim = heldNames[rng.int(heldNames.length)] as string;
    const r = this.cell.release(s, victim, this.heldBy(s).get(victim) as number);
    expect(r.outcome).toMatchObject({ ok: true, released: true });
    this.heldBy(s).delete(victim);
    this.promoted(r.events);
  }

  cancelFirst(s: SessionId): void {
    const [victim, requestId] = [...this.waitsOf(s).entries()][0] as [string, string];
    const r = this.cell.cancel(s, victim, requestId);
    expect(r.outcome).toMatchObject({ ok: true, cancelled: true });
    this.waitsOf(s).delete(victim);
    this.promoted(r.events);
  }

  /** An exclusive holder makes later shared requests of the other session queue. */
  grantFree(s: SessionId, other: SessionId, names: readonly string[]): void {
    const mine = this.heldBy(s);
    const busy = (n: string): boolean => mine.has(n) || this.waitsOf(s).has(n) || this.heldBy(other).has(n) || this.waitsOf(other).has(n);
    const free = names.find((n) => !busy(n));
    if (free !== undefined) mine.set(free, this.cell.grant(s, free));
  }

  /** Waiters granted by a release or cancel move from waiting to held. */
  private promoted(events: readonly LockEvent[]): void {
    for (const e of events) {
      if (e.type !== 'ACQUIRED') continue;
      expect(this.waitsOf(e.sessionId).delete(e.name)).toBe(true);
      this.heldBy(e.sessionId).set(e.name, e.token);
    }
  }
}

describe("a session's list of locks", () => {
  it('names exactly the locks held and awaited through long histories of acquires, releases, re-acquires and cancels', () => {
    const rng = new SeededRandom(20261130);
    const cell = new Cell({ autoClaim: true });
    const [a, b] = [cell.open(), cell.open()];
    const m = new TwoSessions(cell, a, b);
    const names = Array.from({ length: 120 }, (_, i) => `/ls/payments/n${i}`);
    let peak = 0;
    for (let step = 0; step < 1500; step++) {
      const s = rng.int(4) === 0 ? b : a; // a does most of the work, so its list grows far past the removal window
      const other = s === a ? b : a;
      const name = names[rng.int(names.length)] as string;
      const roll = rng.int(10);
      if (roll < 6 && !m.heldBy(s).has(name) && !m.waitsOf(s).has(name)) m.acquire(s, name);
      else if (roll < 9 && m.heldBy(s).size > 0) m.releaseOne(s, rng);
      else if (m.waitsOf(s).size > 0) m.cancelFirst(s);
      else if (rng.int(3) === 0) m.grantFree(s, other, names);
      if (step % 25 === 0) m.check();
      peak = Math.max(peak, m.heldBy(a).size + m.waitsOf(a).size);
    }
    m.check();
    // Far past the removal window (8 from each end) and the size at which compaction switches to a Set (32).
    expect(peak).toBeGreaterThan(40);
    const closed = cell.close(a);
    expect(closed.outcome).toEqual({ ok: true, released: [...m.heldBy(a).keys()].sort() });
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

/**
 * Goal: namespace ownership (docs/decisions/0005-cells-own-namespaces.md)
 * and the state side of a live tenant move
 * (docs/decisions/0003-revisions-are-log-index-plus-base.md,
 * docs/decisions/0004-sessions-belong-to-one-namespace.md): claim, freeze,
 * export, import into another cell whose log index is far lower, drop;
 * tokens keep growing.
 * Method: two harness cells exchange ExportNamespace bytes through
 * ImportNamespace entries; outcomes, lock states and tokens are checked.
 */
import { describe, expect, it } from 'vitest';
import { Namespace, RequestId, Revision, SessionId } from '@fencer/base';
import { makeSessionId } from '@fencer/contract';
import { Cell } from '../test/harness.js';
import {
  encodeCommand,
  LockStateMachine,
  NO_CREDENTIALS,
  NO_QUOTAS,
  validateNamespaceExport,
  type ExportNamespaceOutcome,
} from './index.js';

const NS = Namespace('payments');
const X = '/ls/payments/invoices/42';
const Y = '/ls/payments/invoices/43';

function exportOf(cell: Cell, ns = NS): ExportNamespaceOutcome {
  expect(cell.run({ kind: 'FreezeNamespace', namespace: ns }).outcome).toEqual({ ok: true, changed: true });
  const r = cell.run({ kind: 'ExportNamespace', namespace: ns });
  if (!r.outcome.ok) throw new Error(`export failed: ${r.outcome.code}`);
  expect(r.outcome.highestRevision).toBe(r.revision);
  return r.outcome;
}

describe('ownership without a control plane (auto-claim)', () => {
  it('claims a namespace through its first OpenSession, once', () => {
    const cell = new Cell({ autoClaim: true });
    const first = cell.run({ kind: 'OpenSession', sessionId: makeSessionId(NS, 'a'), clientId: 'w', namespace: NS, ttlMs: 1000 });
    expect(first.outcome).toMatchObject({ ok: true, claimed: true, existed: false });
    const second = cell.run({ kind: 'OpenSession', sessionId: makeSessionId(NS, 'b'), clientId: 'w', namespace: NS, ttlMs: 1000 });
    expect(second.outcome).toMatchObject({ ok: true, claimed: false });
    expect(cell.fsm.namespaceInfo('payments')).toEqual({
      namespace: 'payments',
      state: 'active',
      lastRevision: second.revision,
      sessions: 2,
      locks: 0,
      waiters: 0,
      quotas: NO_QUOTAS,
      credentials: NO_CREDENTIALS,
    });
    expect(cell.fsm.checkNamespace('anything-else')).toBeUndefined();
  });

  it('re-applying the same OpenSession answers existed; a clashing one is refused', () => {
    const cell = new Cell();
    const cmd = { kind: 'OpenSession', sessionId: makeSessionId(NS, 'a'), clientId: 'w', namespace: NS, ttlMs: 1000 } as const;
    cell.run(cmd);
    expect(cell.run(cmd).outcome).toMatchObject({ ok: true, existed: true });
    expect(cell.run({ ...cmd, clientId: 'other' }).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(cell.run({ ...cmd, sessionId: makeSessionId(Namespace('billing'), 'a') }).outcome).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
  });

  it('respects namespacesMax when claiming', () => {
    const cell = new Cell({ autoClaim: true, limits: { namespacesMax: 1 } });
    cell.open('payments');
    expect(() => cell.open('billing')).toThrow(/QUOTA_EXCEEDED/);
  });
});

describe('explicit ownership (a control plane manages the fleet)', () => {
  it('answers NAMESPACE_NOT_HERE until the namespace is claimed', () => {
    const cell = new Cell({ autoClaim: false });
    expect(() => cell.open('payments')).toThrow(/NAMESPACE_NOT_HERE/);
    expect(cell.acquire(SessionId('payments:x'), X).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_NOT_HERE' });
    expect(cell.fsm.checkNamespace('payments')).toMatchObject({ code: 'NAMESPACE_NOT_HERE' });
    expect(cell.run({ kind: 'ClaimNamespace', namespace: NS }).outcome).toEqual({ ok: true, changed: true });
    expect(cell.run({ kind: 'ClaimNamespace', namespace: NS }).outcome).toEqual({ ok: true, changed: false });
    const a = cell.open('payments');
    expect(cell.acquire(a, X).outcome).toMatchObject({ status: 'GRANTED' });
    expect(cell.fsm.checkNamespace('payments')).toBeUndefined();
  });

  it('refuses to freeze, export or drop a namespace it does not own', () => {
    const cell = new Cell({ autoClaim: false });
    for (const kind of ['FreezeNamespace', 'UnfreezeNamespace', 'ExportNamespace', 'DropNamespace'] as const) {
      expect(cell.run({ kind, namespace: NS }).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_NOT_HERE' });
    }
    expect(cell.run({ kind: 'ClaimNamespace', namespace: Namespace('bad/ns') }).outcome).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
  });
});

describe('a frozen namespace rejects mutations with NAMESPACE_MOVING', () => {
  it('rejects every mutating command, answers retries and reads, and resumes after unfreeze', () => {
    const cell = new Cell();
    const [a, b] = [cell.open(), cell.open()];
    const ta = cell.grant(a, X, { requestId: 'ra', lockDelayMs: 1000 });
    cell.acquire(b, X, { requestId: 'rb' });
    const freeze = cell.run({ kind: 'FreezeNamespace', namespace: NS });
    const lockBefore = cell.fsm.getLock(X);
    const moving = { ok: false, code: 'NAMESPACE_MOVING' };
    expect(
      cell.run({ kind: 'OpenSession', sessionId: makeSessionId(NS, 'zz'), clientId: 'c', namespace: NS, ttlMs: 1000 }).outcome,
    ).toMatchObject(moving);
    expect(cell.acquire(a, Y).outcome).toMatchObject(moving);
    expect(cell.release(a, X, ta).outcome).toMatchObject(moving);
    expect(cell.cancel(b, X, 'rb').outcome).toMatchObject(moving);
    expect(cell.close(a).outcome).toMatchObject(moving);
    expect(cell.expire(a).outcome).toMatchObject(moving);
    expect(cell.run({ kind: 'LiftLockDelay', name: X, delayRevision: Revision(1) }).outcome).toMatchObject(moving);
    // Retries of known request ids are answered from the record; reads work.
    expect(cell.acquire(a, X, { requestId: 'ra' }).outcome).toMatchObject({ status: 'GRANTED', token: ta, deduped: true });
    expect(cell.acquire(b, X, { requestId: 'rb' }).outcome).toMatchObject({ status: 'QUEUED', position: 0, deduped: true });
    expect(cell.fsm.checkToken(X, ta)).toEqual({ current: true, latestToken: ta });
    expect(cell.view(X).holders).toEqual([`${a}:${ta}:E`]);
    // Nothing in the namespace changed while frozen.
    expect(cell.fsm.namespaceInfo('payments')).toMatchObject({ state: 'frozen', lastRevision: freeze.revision, sessions: 2, locks: 1 });
    expect(cell.fsm.getLock(X)).toEqual(lockBefore);
    cell.run({ kind: 'UnfreezeNamespace', namespace: NS });
    expect(cell.release(a, X, ta).outcome).toEqual({ ok: true, released: true });
  });

  it('leaves other namespaces alone', () => {
    const cell = new Cell();
    cell.open('payments');
    const c = cell.open('billing');
    cell.run({ kind: 'FreezeNamespace', namespace: NS });
    expect(cell.acquire(c, '/ls/billing/x').outcome).toMatchObject({ status: 'GRANTED' });
  });
});

/** A cell far ahead in its log, with holders, a queue, shared holders, a try-lock and a second namespace. */
function sourceWithState() {
  const source = new Cell({ autoClaim: true }, 1_000_000);
  const [a, b, c] = [source.open(), source.open(), source.open()];
  const ta = source.grant(a, X, { requestId: 'a-x', lockDelayMs: 2000 });
  source.acquire(b, X, { requestId: 'b-x' });
  const tb = source.grant(b, Y, { mode: 'SHARED', requestId: 'b-y' });
  const tc = source.grant(c, Y, { mode: 'SHARED', requestId: 'c-y' });
  source.acquire(c, X, { requestId: 'c-try', tryLock: true });
  source.open('billing');
  return { source, a, b, c, ta, tb, tc };
}

describe('moving a namespace: export, import into a cell with a far lower index, drop', () => {
  it('requires a frozen namespace to export', () => {
    const { source } = sourceWithState();
    expect(source.run({ kind: 'ExportNamespace', namespace: NS }).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
  });

  it('carries sessions, locks, queues and dedupe results; new tokens exceed every exported one', () => {
    const { source, a, b, c, ta, tb, tc } = sourceWithState();
    const exported = exportOf(source);
    expect(exported).toMatchObject({ sessions: 3, locks: 2 });
    expect(validateNamespaceExport(exported.data)).toEqual({ namespace: 'payments', highestRevision: exported.highestRevision });

    const target = new Cell({ autoClaim: false }, 10);
    const imp = target.run({ kind: 'ImportNamespace', namespace: NS, data: exported.data, activate: true });
    expect(imp.outcome).toMatchObject({ ok: true, sessions: 3, locks: 2 });
    expect(imp.revision).toBeGreaterThan(exported.highestRevision);
    expect(target.fsm.revisionBase).toBe(imp.revision - target.index);

    // Same lock states, same sessions.
    for (const name of [X, Y]) expect(target.fsm.getLock(name)).toEqual(source.fsm.getLock(name));
    expect([...target.fsm.sessions()].map((s) => s.sessionId).sort()).toEqual([a, b, c].sort());
    expect(target.fsm.namespaceInfo('payments')?.state).toBe('active');
    // Dedupe results moved too: retries answer as on the source.
    expect(target.acquire(a, X, { requestId: 'a-x' }).outcome).toMatchObject({ status: 'GRANTED', token: ta, deduped: true });
    expect(target.acquire(b, X, { requestId: 'b-x' }).outcome).toMatchObject({ status: 'QUEUED', position: 0, deduped: true });
    expect(target.acquire(c, X, { requestId: 'c-try' }).outcome).toMatchObject({ status: 'TIMED_OUT', reason: 'busy', deduped: true });
    // New grants get tokens above everything the source issued.
    const rel = target.release(a, X, ta);
    expect(rel.outcome).toEqual({ ok: true, released: true });
    const promoted = rel.events.find((e) => e.type === 'ACQUIRED');
    expect(promoted?.sessionId).toBe(b);
    expect(promoted?.token).toBeGreaterThan(exported.highestRevision);
    expect(target.acquire(b, X, { requestId: 'b-x' }).outcome).toMatchObject({ status: 'GRANTED', token: rel.revision, deduped: true });
    const tNew = target.grant(a, '/ls/payments/other');
    expect(tNew).toBeGreaterThan(Math.max(ta, tb, tc, exported.highestRevision));
  });

  it('the source answers NAMESPACE_NOT_HERE after the drop, even with auto-claim, and keeps its other namespaces', () => {
    const { source, a } = sourceWithState();
    exportOf(source);
    const drop = source.run({ kind: 'DropNamespace', namespace: NS });
    expect(drop.outcome).toEqual({ ok: true, sessions: 3, locks: 2 });
    expect(source.acquire(a, X).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_NOT_HERE' });
    expect(source.close(a).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_NOT_HERE' });
    expect(() => source.open('payments')).toThrow(/NAMESPACE_NOT_HERE/);
    expect(source.fsm.checkNamespace('payments')).toMatchObject({ code: 'NAMESPACE_NOT_HERE' });
    expect(source.fsm.getLock(X).holders).toEqual([]);
    expect(source.fsm.namespaceInfo('payments')).toMatchObject({ state: 'moved', sessions: 0, locks: 0 });
    expect(source.fsm.namespaceInfo('billing')).toMatchObject({ state: 'active', sessions: 1 });
    source.fsm.checkInvariants();
  });

  it('can move back: a moved-out namespace can be imported again, and tokens keep growing', () => {
    const { source, a, ta } = sourceWithState();
    const out = exportOf(source);
    source.run({ kind: 'DropNamespace', namespace: NS });
    const target = new Cell({ autoClaim: false }, 5);
    target.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: true });
    const rel = target.release(a, X, ta);
    const tb = rel.events.find((e) => e.type === 'ACQUIRED')?.token ?? 0;
    const back = exportOf(target);
    target.run({ kind: 'DropNamespace', namespace: NS });
    const imp = source.run({ kind: 'ImportNamespace', namespace: NS, data: back.data, activate: false });
    expect(imp.outcome).toMatchObject({ ok: true });
    expect(source.fsm.namespaceInfo('payments')?.state).toBe('frozen');
    expect(source.fsm.namespaceState('payments')).toBe('frozen');
    expect(source.fsm.namespaceState('nowhere')).toBeUndefined();
    source.run({ kind: 'UnfreezeNamespace', namespace: NS });
    const [holder] = source.fsm.getLock(X).holders;
    expect(holder?.token).toBe(tb);
    const rel2 = source.release(holder!.sessionId, X, tb);
    expect(rel2.outcome).toEqual({ ok: true, released: true });
    expect(source.grant(a, X)).toBeGreaterThan(back.highestRevision);
  });

  it('keeps its revision base when its own index is already higher than the export', () => {
    const { source } = sourceWithState();
    const out = exportOf(source);
    const target = new Cell({ autoClaim: false }, 5_000_000);
    const imp = target.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: true });
    expect(target.fsm.revisionBase).toBe(0);
    expect(imp.revision).toBe(target.index);
  });
});

describe('moving a namespace: what an import refuses, and what the new leader learns', () => {
  it('refuses an import onto a namespace it owns, of another namespace, or of malformed bytes, without crashing', () => {
    const { source } = sourceWithState();
    const out = exportOf(source);
    const target = new Cell({ autoClaim: true }, 7);
    target.open('payments');
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: true }).outcome).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
    expect(target.run({ kind: 'ImportNamespace', namespace: Namespace('billing'), data: out.data, activate: true }).outcome).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
    const truncated = out.data.slice(0, out.data.length - 3);
    expect(target.run({ kind: 'ImportNamespace', namespace: Namespace('other'), data: truncated, activate: true }).outcome).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
    expect(validateNamespaceExport(truncated)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    const flipped = out.data.slice();
    flipped[flipped.length - 1] = 0xff;
    expect(validateNamespaceExport(flipped)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(target.fsm.revisionBase).toBe(0);
    target.fsm.checkInvariants();
  });

  it('refuses an import that would exceed the cell’s session limit', () => {
    const { source } = sourceWithState();
    const out = exportOf(source);
    const target = new Cell({ autoClaim: true, limits: { sessionsMax: 3, sessionsPerNamespaceMax: 3 } }, 7);
    target.open('billing');
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: true }).outcome).toMatchObject({
      ok: false,
      code: 'QUOTA_EXCEEDED',
    });
  });

  it('drop requires a frozen namespace', () => {
    const cell = new Cell();
    cell.open();
    expect(cell.run({ kind: 'DropNamespace', namespace: NS }).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
  });

  it('an imported namespace’s waiters and delayed locks are reported for the new leader’s trackers', () => {
    const source = new Cell({ autoClaim: true }, 100);
    const [a, b, c] = [source.open(), source.open(), source.open()];
    source.grant(a, X, { lockDelayMs: 3000 });
    source.acquire(b, X, { requestId: 'b', waitMs: 777 });
    source.expire(a);
    source.grant(c, Y);
    const out = exportOf(source);
    const target = new Cell({ autoClaim: false }, 1);
    target.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: true });
    expect([...target.fsm.waiters()]).toMatchObject([{ sessionId: b, name: X, requestId: RequestId('b'), waitMs: 777 }]);
    const delayed = [...target.fsm.delayedLocks()];
    expect(delayed).toMatchObject([{ name: X, delayMs: 3000 }]);
    const lift = target.run({ kind: 'LiftLockDelay', name: X, delayRevision: delayed[0]!.delayRevision });
    expect(lift.outcome).toEqual({ ok: true, lifted: true });
    expect(lift.events[0]).toMatchObject({ type: 'ACQUIRED', sessionId: b, token: lift.revision });
    expect(lift.revision).toBeGreaterThan(out.highestRevision);
  });
});

describe('an export too large for one entry: staged in chunks, then imported as one', () => {
  /** Splits bytes into pieces of at most `size`. */
  const pieces = (data: Uint8Array, size: number): { offset: number; data: Uint8Array }[] => {
    const out = [];
    for (let offset = 0; offset < data.length; offset += size) out.push({ offset, data: data.subarray(offset, offset + size) });
    return out;
  };
  const stage = (cell: Cell, data: Uint8Array, offset: number, chunk: Uint8Array) =>
    cell.run({ kind: 'StageImportChunk', namespace: NS, totalBytes: data.length, offset, data: chunk }).outcome;

  it('imports staged chunks exactly as one ImportNamespace would, retries of a landed chunk changing nothing', () => {
    const { source } = sourceWithState();
    const out = exportOf(source);
    const whole = new Cell({ autoClaim: false }, 1000);
    whole.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: false });
    // Two entries per chunk (it and its retry), then the import at the same index as the whole one's.
    const staged = new Cell({ autoClaim: false }, 1000 - 2 * Math.ceil(out.data.length / 50));
    for (const p of pieces(out.data, 50)) {
      expect(stage(staged, out.data, p.offset, p.data)).toEqual({ ok: true, stagedBytes: p.offset + p.data.length });
      // A retry of the chunk just staged (its answer was lost) changes nothing.
      expect(stage(staged, out.data, p.offset, p.data)).toEqual({ ok: true, stagedBytes: p.offset + p.data.length });
    }
    const imp = staged.run({ kind: 'ImportStagedNamespace', namespace: NS, totalBytes: out.data.length, activate: false });
    expect(imp.outcome).toMatchObject({ ok: true, sessions: 3, locks: 2, highestRevision: out.highestRevision });
    expect(staged.fsm.stateHash()).toBe(whole.fsm.stateHash());
    staged.fsm.checkInvariants();
    // Nothing is left staged: a second commit has nothing to import.
    expect(
      staged.run({ kind: 'ImportStagedNamespace', namespace: NS, totalBytes: out.data.length, activate: false }).outcome,
    ).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
  });

  it('refuses a gap, a changed total, an incomplete commit and an export beyond importBytesMax', () => {
    const { source } = sourceWithState();
    const out = exportOf(source);
    const target = new Cell({ autoClaim: false, limits: { importBytesMax: out.data.length + 10 } }, 3);
    const [first, second, third] = pieces(out.data, 40);
    expect(stage(target, out.data, third!.offset, third!.data)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(stage(target, out.data, 0, first!.data)).toEqual({ ok: true, stagedBytes: 40 });
    expect(stage(target, out.data, third!.offset, third!.data)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(
      target.run({ kind: 'StageImportChunk', namespace: NS, totalBytes: out.data.length + 1, offset: 40, data: second!.data }).outcome,
    ).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(target.run({ kind: 'ImportStagedNamespace', namespace: NS, totalBytes: out.data.length, activate: true }).outcome).toMatchObject(
      {
        ok: false,
        code: 'INVALID_ARGUMENT',
      },
    );
    expect(
      target.run({ kind: 'StageImportChunk', namespace: Namespace('other'), totalBytes: 20, offset: 0, data: new Uint8Array(5) }).outcome,
    ).toMatchObject({ ok: false, code: 'QUOTA_EXCEEDED' });
    target.fsm.checkInvariants();
  });

  it('keeps staged chunks in its snapshots, and a drop (a move rolling back) discards them', () => {
    const { source } = sourceWithState();
    const out = exportOf(source);
    const target = new Cell({ autoClaim: false }, 3);
    const [first, ...rest] = pieces(out.data, 64);
    stage(target, out.data, 0, first!.data);
    const restored = LockStateMachine.restore(target.fsm.snapshot(), { autoClaim: false });
    expect(restored.snapshot()).toEqual(target.fsm.snapshot());
    let index = target.index;
    for (const p of rest) {
      const data = encodeCommand({ kind: 'StageImportChunk', namespace: NS, totalBytes: out.data.length, offset: p.offset, data: p.data });
      restored.applyEntry(++index, data);
    }
    const commit = encodeCommand({ kind: 'ImportStagedNamespace', namespace: NS, totalBytes: out.data.length, activate: true });
    expect(restored.applyEntry(++index, commit).outcome).toMatchObject({ ok: true, sessions: 3 });

    expect(target.run({ kind: 'DropNamespace', namespace: NS }).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_NOT_HERE' });
    const again = [...rest].reverse()[0]!;
    expect(stage(target, out.data, again.offset, again.data)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(target.fsm.snapshot()).toEqual(new Cell({ autoClaim: false }, 0).fsm.snapshot().map((b, i) => (i === 1 ? target.index : b)));
  });

  it('carries the namespace revision (its freeze) beside the highest, and still imports a format-1 export', () => {
    const { source } = sourceWithState();
    const freeze = source.run({ kind: 'FreezeNamespace', namespace: NS });
    source.open('billing');
    const read = source.fsm.readExport(NS);
    if (!read.ok) throw new Error(read.code);
    expect(read.namespaceRevision).toBe(freeze.revision);
    expect(read.highestRevision).toBe(source.fsm.revision);
    const target = new Cell({ autoClaim: false }, 2);
    const imp = target.run({ kind: 'ImportNamespace', namespace: NS, data: read.data, activate: true });
    expect(imp.outcome).toMatchObject({ ok: true, namespaceRevision: freeze.revision, highestRevision: read.highestRevision });
    // Format 1: the same without the namespace revision, which then reads as the highest, and
    // without the quotas that format 3 added after it (three zero varuints here: none were set) and
    // the move fence's flag and the credentials that format 4 added after those (0: no fence; a zero count).
    const v3 = read.data;
    const nameBytes = 1 + NS.length;
    let at = 1 + nameBytes;
    while ((v3[at]! & 0x80) !== 0) at++;
    let end = at + 1;
    while ((v3[end]! & 0x80) !== 0) end++;
    expect([...v3.subarray(end + 1, end + 6)]).toEqual([0, 0, 0, 0, 0]);
    const v1 = Uint8Array.from([1, ...v3.subarray(1, at + 1), ...v3.subarray(end + 6)]);
    const old = new Cell({ autoClaim: false }, 2).run({ kind: 'ImportNamespace', namespace: NS, data: v1, activate: true });
    expect(old.outcome).toMatchObject({ ok: true, namespaceRevision: read.highestRevision });
  });
});

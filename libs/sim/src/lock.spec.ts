/**
 * Goal: the lock pieces of the simulator do what the runs rely on, and
 * every lock checker can fire: planted bugs rewrite only what they should,
 * the workload retries the same request until a definite answer, and
 * each lock checker reports a broken history and stays quiet on a good one.
 * Planted bugs in whole runs are in test/planted.spec.ts.
 * Method: direct calls with hand-built commands and synthetic observation
 * sequences.
 */
import { describe, expect, it } from 'vitest';
import { FencerError, NodeId, type RequestId, type Revision, SeededRandom, type SessionId, err, ok } from '@fencer/base';
import { type ApplyResult, type Command, type LockState, LockStateMachine } from '@fencer/lock-fsm';
import { Checkers } from './checkers.js';
import { LockCheckers, lockFingerprint } from './lock-checkers.js';
import { lockAnswered, lockName, newLockClient, nextLockOp } from './lock-workload.js';
import { plantedHooks } from './planted.js';

const n1 = NodeId('n1');
const n2 = NodeId('n2');
const A = 'alpha:a' as SessionId;
const B = 'alpha:b' as SessionId;
const L = lockName('alpha', 0);

const open = (sessionId: SessionId): Command => ({
  kind: 'OpenSession',
  sessionId,
  clientId: sessionId,
  namespace: 'alpha' as never,
  ttlMs: 3_000,
});
const acquire = (sessionId: SessionId, requestId: string, mode: 'EXCLUSIVE' | 'SHARED' = 'EXCLUSIVE'): Command => ({
  kind: 'Acquire',
  sessionId,
  name: L,
  mode,
  requestId: requestId as RequestId,
  waitMs: 1_000,
  lockDelayMs: 0,
  tryLock: false,
});
const release = (sessionId: SessionId, token: number): Command => ({ kind: 'Release', sessionId, name: L, token: token as Revision });

/**
 * Applies commands at indices 1.. to a fresh state machine, feeding `lc` the
 * way the simulation does from the first replica; `rewrite` plants a bug in
 * what is reported at an index.
 */
function history(
  lc: LockCheckers,
  commands: Command[],
  node = n1,
  rewrite?: (index: number, r: ApplyResult) => ApplyResult,
): LockStateMachine {
  const fsm = new LockStateMachine({ autoClaim: true });
  commands.forEach((c, i) => {
    const result = fsm.apply(i + 1, c);
    lc.applied(node, i + 1, c, rewrite ? rewrite(i + 1, result) : result, (name) => fsm.getLock(name));
  });
  return fsm;
}

describe("planted lock bugs (the cell's test hooks)", () => {
  it('doubleGrant rewrites what every replica reports, not the state', () => {
    const hooks = plantedHooks('doubleGrant', () => {
      throw new Error('not a read bug');
    });
    const fsm = new LockStateMachine({ autoClaim: true });
    const commands = [open(A), open(B), acquire(A, 'r1'), acquire(B, 'r2')];
    const reported = commands.map((c, i) => hooks.rewriteApplied!(c, fsm.apply(i + 1, c)));
    expect(reported[3]!.outcome).toMatchObject({ status: 'GRANTED', token: 4 });
    expect(fsm.getLock(L).waiters.map((w) => w.sessionId)).toEqual([B]);
  });

  it('each bug plants exactly its own hook, and none plants nothing', () => {
    const lagging = new LockStateMachine({ autoClaim: true });
    expect(Object.keys(plantedHooks(null, () => lagging))).toEqual([]);
    expect(plantedHooks('staleLockRead', () => lagging).readState!()).toBe(lagging);
    expect(plantedHooks('heartbeatWithoutConfirmation', () => lagging)).toEqual({ heartbeatWithoutConfirmation: true });
  });
});

describe('lock workload', () => {
  it('retries a write as the same request until it has a definite answer, then moves on', () => {
    const c = newLockClient(1);
    const r = new SeededRandom(5);
    const first = nextLockOp(c, r, 0);
    if (first.kind !== 'write' || first.write.method !== 'openSession') throw new Error('a new client opens a session first');
    expect(nextLockOp(c, r, 0)).toEqual(first);
    expect(lockAnswered(c, first.write, err(new FencerError('NO_LEADER', 'election')))).toEqual({ grant: null, done: false });
    expect(nextLockOp(c, r, 0)).toEqual(first);
    lockAnswered(c, first.write, ok({ sessionId: 'alpha:s1', ttlMs: first.write.request.ttlMs }));
    expect(c.session?.id).toBe('alpha:s1');
    const second = nextLockOp(c, r, 0);
    expect(second.kind === 'write' && 'sessionId' in second.write.request && second.write.request.sessionId).toBe('alpha:s1');
    expect(['acquire', 'closeSession']).toContain(second.kind === 'write' && second.write.method);
  });

  it('a refused write ends the session (it expired while the client could not reach the leader)', () => {
    const c = newLockClient(2);
    const r = new SeededRandom(7);
    const first = nextLockOp(c, r, 0);
    if (first.kind !== 'write') throw new Error('a write');
    lockAnswered(c, first.write, ok({ sessionId: 'beta:s2', ttlMs: 2_000 }));
    const next = nextLockOp(c, r, 0);
    if (next.kind !== 'write') throw new Error('a write');
    expect(lockAnswered(c, next.write, err(new FencerError('SESSION_NOT_FOUND', 'gone')))).toEqual({ grant: null, done: true });
    expect(c.session).toBeNull();
  });
});

const now = (): number => 0;
const fired = (c: Checkers): string[] => c.violations.map((v) => v.checker);

/** The checkers that fire when `grants` are acknowledged over `commands` whose reported result at `at` is rewritten. */
function firedWithPlanted(
  commands: Command[],
  at: number,
  rewrite: (r: ApplyResult) => ApplyResult,
  grants: [SessionId, number][],
): string[] {
  const c = new Checkers(now);
  const lc = new LockCheckers(c);
  history(lc, commands, n1, (i, r) => (i === at ? rewrite(r) : r));
  for (const [sessionId, token] of grants) lc.ackedGrant({ name: L, sessionId, token, mode: 'EXCLUSIVE' });
  return fired(c);
}

describe('lock checkers fire on broken histories and only then: fencing tokens and exclusion', () => {
  it('fencing-token: acknowledged grants must have strictly increasing tokens in log order, and exist', () => {
    const c = new Checkers(now);
    const lc = new LockCheckers(c);
    history(lc, [open(A), open(B), acquire(A, 'r1'), release(A, 3), acquire(B, 'r2')]);
    lc.ackedGrant({ name: L, sessionId: A, token: 3, mode: 'EXCLUSIVE' });
    lc.ackedGrant({ name: L, sessionId: B, token: 5, mode: 'EXCLUSIVE' });
    lc.ackedGrant({ name: L, sessionId: B, token: 5, mode: 'EXCLUSIVE' }); // A retry's answer: the same grant.
    expect(c.violationCount).toBe(0);
    lc.ackedGrant({ name: L, sessionId: A, token: 9, mode: 'EXCLUSIVE' });
    expect(fired(c)).toEqual(['fencing-token']);

    // A token reused by a later grant (events and answers agree, so only the order tells).
    const reused = firedWithPlanted(
      [open(A), open(B), acquire(A, 'r1'), release(A, 3), acquire(B, 'r2')],
      5,
      (r) => ({
        ...r,
        events: r.events.map((e) => ({ ...e, token: 3 as Revision })),
      }),
      [
        [A, 3],
        [B, 3],
      ],
    );
    expect(reused).toEqual(['fencing-token']);
  });

  it('lock-exclusion: a grant acknowledged while an earlier conflicting one had not ended', () => {
    const c = new Checkers(now);
    const lc = new LockCheckers(c);
    history(lc, [open(A), open(B), acquire(A, 'r1', 'SHARED'), acquire(B, 'r2', 'SHARED'), release(A, 3), release(B, 4), acquire(A, 'r3')]);
    for (const [s, t, m] of [
      [A, 3, 'SHARED'],
      [B, 4, 'SHARED'],
      [A, 7, 'EXCLUSIVE'],
    ] as const)
      lc.ackedGrant({ name: L, sessionId: s, token: t, mode: m });
    expect(c.violationCount).toBe(0);

    // B told it holds L exclusively at 4 while A still holds it (from 3): a double grant.
    const doubled = firedWithPlanted(
      [open(A), open(B), acquire(A, 'r1'), acquire(B, 'r2')],
      4,
      (r) => ({
        ...r,
        events: r.events.map((e) => ({ ...e, type: 'ACQUIRED' as const, token: 4 as Revision })),
      }),
      [
        [A, 3],
        [B, 4],
      ],
    );
    expect(doubled).toEqual(['lock-exclusion']);
  });
});

/** A held L (token 3) and released it; B was granted L at 5 and told so; then a read of L begins. */
function readAfterHandOver(): { c: Checkers; lc: LockCheckers; fsm: LockStateMachine; barrier: ReturnType<LockCheckers['readBarrier']> } {
  const c = new Checkers(now);
  const lc = new LockCheckers(c);
  const fsm = history(lc, [open(A), open(B), acquire(A, 'r1'), release(A, 3), acquire(B, 'r2')]);
  lc.ackedGrant({ name: L, sessionId: B, token: 5, mode: 'EXCLUSIVE' });
  return { c, lc, fsm, barrier: lc.readBarrier(L) };
}

describe('lock checkers fire on broken histories and only then: reads and results', () => {
  it('stale-read: a read must show the applied history at its index, at least every acked write, and no holder below the latest grant', () => {
    const { c, lc, fsm, barrier } = readAfterHandOver();
    lc.readServed(n1, barrier, 5, { kind: 'GetLock', state: fsm.getLock(L) });
    lc.readServed(n1, barrier, 5, { kind: 'CheckToken', token: 5, answer: fsm.checkToken(L, 5) });
    expect(c.violationCount).toBe(0);
    // Content of index 3 (A holds, token 3) served as if at 5.
    const old: LockState = lc.stateAt(L, 3);
    expect(lockFingerprint(old)).toContain(`${A}/EXCLUSIVE/3`);
    lc.readServed(n2, barrier, 5, { kind: 'GetLock', state: old });
    // A CheckToken answer that is not the history's.
    lc.readServed(n2, barrier, 5, { kind: 'CheckToken', token: 3, answer: { current: true, latestToken: 3 as Revision } });
    expect(fired(c)).toEqual(['stale-read', 'stale-read']);
  });

  it('stale-read: the fencing floor holds even where the history itself is wrong', () => {
    const { c, lc, fsm, barrier } = readAfterHandOver();
    // The state reads as the history has it at 3 (a replica whose history is wrong would agree with itself).
    const stale = lc.stateAt(L, 3);
    (lc as unknown as { stateAt: (n: string, i: number) => LockState }).stateAt = () => stale;
    lc.readServed(n1, barrier, 5, { kind: 'GetLock', state: stale });
    expect(fired(c)).toEqual(['stale-read']);
    expect(c.violations[0]?.detail).toContain('token 3');
    expect(fsm.getLock(L).holders[0]?.token).toBe(5);
  });

  it('state machine safety: two replicas with different results at one index', () => {
    const c = new Checkers(now);
    const lc = new LockCheckers(c);
    history(lc, [open(A), acquire(A, 'r1')], n1);
    history(lc, [open(A), acquire(A, 'r1')], n2);
    expect(c.violationCount).toBe(0);
    const other = new LockStateMachine({ autoClaim: true });
    other.apply(1, open(A));
    const r = other.apply(2, acquire(A, 'r1', 'SHARED'));
    lc.applied(NodeId('n3'), 2, acquire(A, 'r1', 'SHARED'), r, (name) => other.getLock(name));
    expect(fired(c)).toEqual(['state-machine-safety']);
  });
});

/**
 * Goal: each cross-cell move checker fires on a history that breaks its
 * property and stays quiet on one that keeps it.
 * Method: synthetic applied histories of two cells fed to MoveCheckers
 * directly: a claim, grants, a freeze, an import (faithful or not), grants
 * on the target, and a move record switching the route.
 */
import { describe, expect, it } from 'vitest';
import { Namespace, RequestId, type Revision, SessionId } from '@fencer/base';
import type { ApplyResult, Command, LockEvent, LockState } from '@fencer/lock-fsm';
import type { Move } from '@fencer/meta-fsm';
import { MoveCheckers } from './moves-checkers.js';

const NAME = '/ls/alpha/lock-0';
const ns = Namespace('alpha');

function holder(session: string, token: number): LockState['holders'][number] {
  return { sessionId: SessionId(session), clientId: session, mode: 'EXCLUSIVE', token: token as Revision, lockDelayMs: 0 };
}

function waiter(session: string, request: string): LockState['waiters'][number] {
  return {
    sessionId: SessionId(session),
    clientId: session,
    mode: 'EXCLUSIVE',
    requestId: RequestId(request),
    waitMs: 1_000,
    lockDelayMs: 0,
    queuedRevision: 5 as Revision,
  };
}

function state(holders: LockState['holders'], waiters: LockState['waiters'] = []): LockState {
  return { name: NAME, mode: holders.length > 0 ? 'EXCLUSIVE' : null, holders, waiters, delayed: false };
}

function result(index: number, events: Partial<LockEvent>[] = []): ApplyResult {
  const full = events.map((e): LockEvent => ({
    type: 'ACQUIRED',
    revision: index as Revision,
    name: NAME,
    sessionId: SessionId('alpha:s1'),
    token: index as Revision,
    requestId: null,
    lock: state([]),
    ...e,
  }));
  return { index, revision: index as Revision, outcome: { ok: true } as ApplyResult['outcome'], events: full };
}

const acquire: Command = {
  kind: 'Acquire',
  sessionId: SessionId('alpha:s1'),
  name: NAME,
  mode: 'EXCLUSIVE',
  requestId: RequestId('r1'),
  waitMs: 0,
  lockDelayMs: 0,
} as unknown as Command;

function move(toCell: string): Move {
  return { id: 'mv1', namespace: 'alpha', fromCell: 'cell-1', toCell, state: 'switching', createdAtMs: 0 };
}

/** cell-1 claims alpha, grants token 10 to s1 with s2 and s3 queued, and freezes; the checker sees it all. */
function frozenOnCell1(): MoveCheckers {
  const c = new MoveCheckers(
    () => 0,
    () => [NAME],
  );
  const held = state([holder('alpha:s1', 10)], [waiter('alpha:s2', 'a'), waiter('alpha:s3', 'b')]);
  c.applied('cell-1', 1, { kind: 'ClaimNamespace', namespace: ns }, result(1), () => state([]));
  c.applied('cell-1', 10, acquire, result(10, [{ token: 10 as Revision }]), () => held);
  c.applied('cell-1', 11, { kind: 'FreezeNamespace', namespace: ns }, result(11), () => held);
  return c;
}

function importOnCell2(c: MoveCheckers, imported: LockState): void {
  c.applied('cell-2', 5, { kind: 'ImportNamespace', namespace: ns, data: new Uint8Array(), activate: false }, result(5), () => imported);
}

describe('MoveCheckers', () => {
  it('stays quiet on a faithful move whose tokens keep growing', () => {
    const c = frozenOnCell1();
    c.ackedGrant({ name: NAME, sessionId: 'alpha:s1', token: 10, mode: 'EXCLUSIVE' });
    importOnCell2(c, state([holder('alpha:s1', 10)], [waiter('alpha:s2', 'a'), waiter('alpha:s3', 'b')]));
    c.moveApplied(move('cell-2'));
    c.applied('cell-2', 6, acquire, result(6, [{ token: 13 as Revision, sessionId: SessionId('alpha:s2') }]), () => state([]));
    expect(c.violations).toEqual([]);
  });

  it('fencing-token: a token on the target at or below one the source granted', () => {
    const c = frozenOnCell1();
    importOnCell2(c, state([holder('alpha:s1', 10)], [waiter('alpha:s2', 'a'), waiter('alpha:s3', 'b')]));
    c.applied('cell-2', 6, acquire, result(6, [{ token: 6 as Revision }]), () => state([]));
    expect(c.violations.map((v) => v.checker)).toEqual(['fencing-token']);
  });

  it('fencing-token: the source granting after the target did (two cells serving one namespace)', () => {
    const c = frozenOnCell1();
    importOnCell2(c, state([holder('alpha:s1', 10)], [waiter('alpha:s2', 'a'), waiter('alpha:s3', 'b')]));
    c.applied('cell-2', 6, acquire, result(6, [{ token: 20 as Revision }]), () => state([]));
    c.applied('cell-1', 12, acquire, result(12, [{ token: 30 as Revision }]), () => state([]));
    expect(c.violations.map((v) => v.checker)).toEqual(['fencing-token']);
  });

  it('acked-grant-lost: an import without a holder the source froze with, or a grant no entry made', () => {
    const c = frozenOnCell1();
    importOnCell2(c, state([], [waiter('alpha:s2', 'a'), waiter('alpha:s3', 'b')]));
    c.ackedGrant({ name: NAME, sessionId: 'alpha:s9', token: 99, mode: 'EXCLUSIVE' });
    expect(c.violations.map((v) => v.checker)).toEqual(['acked-grant-lost', 'acked-grant-lost']);
  });

  it('fifo-order: an import with the queue reordered', () => {
    const c = frozenOnCell1();
    importOnCell2(c, state([holder('alpha:s1', 10)], [waiter('alpha:s3', 'b'), waiter('alpha:s2', 'a')]));
    expect(c.violations.map((v) => v.checker)).toEqual(['fifo-order']);
  });

  it('early-expiry: an expiry within an acknowledged lease fires; one after it does not', () => {
    let nowUs = 0;
    const c = new MoveCheckers(
      () => nowUs,
      () => [NAME],
    );
    const expire = (index: number, session: string): void =>
      c.applied('cell-2', index, { kind: 'ExpireSession', sessionId: SessionId(session) } as Command, result(index), () => state([]));
    c.heartbeatAcked('alpha:s1', 'cell-2', 1_000_000, 2_000);
    c.heartbeatAcked('alpha:s2', 'cell-2', 1_000_000, 2_000);
    nowUs = 2_500_000;
    expire(1, 'alpha:s1');
    nowUs = 3_000_000;
    expire(2, 'alpha:s2');
    expect(c.violations.map((v) => v.checker)).toEqual(['early-expiry']);
    expect(c.violations[0]?.detail).toContain('alpha:s1');
  });

  it('route-ahead-of-import: a switch to a cell with no committed import', () => {
    const c = frozenOnCell1();
    c.moveApplied(move('cell-2'));
    expect(c.violations.map((v) => v.checker)).toEqual(['route-ahead-of-import']);
  });
});

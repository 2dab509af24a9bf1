/**
 * Goal: a snapshot rewritten for a disaster restore keeps the lock table as
 * it was, names the new members, and raises the revision base, so every
 * token the restored cell grants exceeds every token the lost cell could
 * have granted in the raise's window (the Grant promise across restores);
 * a bad rewrite or a damaged snapshot is refused with a DecodeError, never
 * loaded.
 * Method: a real LockStateMachine driven through the test harness; its
 * snapshot rewritten, restored and driven on, next to the original driven on
 * the same commands (the "lost cell" that kept granting after the snapshot).
 */
import { describe, expect, it } from 'vitest';
import { Revision } from '@fencer/base';
import {
  DecodeError,
  encodeCommand,
  LockStateMachine,
  readSnapshotHead,
  rewriteSnapshotForRestore,
  SNAPSHOT_FORMAT_VERSION,
} from './index.js';
import { Cell } from '../test/harness.js';

const NEW_MEMBERS = new Map([
  ['n1', { address: '10.1.0.1:7001', peerAddress: '10.1.0.1:7301' }],
  ['n2', { address: '10.1.0.2:7001', peerAddress: '10.1.0.2:7301' }],
  ['n3', { address: '10.1.0.3:7001', peerAddress: '10.1.0.3:7301' }],
]);

function busyCell(): { cell: Cell; holder: ReturnType<Cell['open']>; token: number } {
  const cell = new Cell();
  cell.run({ kind: 'SetMemberAddress', id: 'old-1', address: '10.0.0.1:7001', peerAddress: '10.0.0.1:7301' });
  const holder = cell.open('payments');
  const waiter = cell.open('payments');
  const token = cell.grant(holder, '/ls/payments/ledger');
  cell.acquire(waiter, '/ls/payments/ledger');
  cell.grant(cell.open('billing'), '/ls/billing/run', { mode: 'SHARED' });
  return { cell, holder, token };
}

describe('rewriteSnapshotForRestore', () => {
  it('keeps every lock, session and waiter; replaces the member directory; raises the base by exactly the raise', () => {
    const { cell } = busyCell();
    const before = cell.fsm.snapshot();
    const rewritten = rewriteSnapshotForRestore(before, { revisionRaise: 1_000_000, members: NEW_MEMBERS });
    const restored = LockStateMachine.restore(rewritten, { autoClaim: true });
    restored.checkInvariants();
    expect(restored.appliedIndex).toBe(cell.fsm.appliedIndex);
    expect(restored.revisionBase).toBe(cell.fsm.revisionBase + 1_000_000);
    expect([...restored.members().keys()]).toEqual(['n1', 'n2', 'n3']);
    for (const name of ['/ls/payments/ledger', '/ls/billing/run']) expect(restored.getLock(name)).toEqual(cell.fsm.getLock(name));
    expect(restored.namespaces()).toEqual(cell.fsm.namespaces());
    expect(readSnapshotHead(rewritten)).toEqual({
      formatVersion: SNAPSHOT_FORMAT_VERSION,
      appliedIndex: cell.fsm.appliedIndex,
      revisionBase: cell.fsm.revisionBase + 1_000_000,
      lastRevision: cell.fsm.appliedIndex + cell.fsm.revisionBase + 1_000_000,
    });
  });

  it('every token the restored cell grants exceeds every token the lost cell granted within the raise', () => {
    const { cell, holder, token } = busyCell();
    const snapshot = cell.fsm.snapshot();
    const snapshotIndex = cell.fsm.appliedIndex;
    const raise = 500;
    // The lost cell goes on granting, for up to `raise` entries past its snapshot (tokens are cell-wide revisions).
    const looper = cell.open('billing');
    let lostToken = cell.grant(looper, '/ls/billing/loop');
    while (cell.index + 2 <= snapshotIndex + raise) {
      cell.release(looper, '/ls/billing/loop', lostToken);
      lostToken = cell.grant(looper, '/ls/billing/loop', { requestId: `again-${cell.index}` });
    }
    expect(lostToken).toBeGreaterThan(token + raise - 3);
    // The restored cell starts from the snapshot with the raised base; its first entry grants the lock to the waiter.
    const rewritten = rewriteSnapshotForRestore(snapshot, { revisionRaise: raise, members: NEW_MEMBERS });
    const restored = LockStateMachine.restore(rewritten, { autoClaim: true });
    const release = encodeCommand({ kind: 'Release', sessionId: holder, name: '/ls/payments/ledger', token: Revision(token) });
    expect(restored.applyEntry(snapshotIndex + 1, release).outcome.ok).toBe(true);
    const next = restored.getLock('/ls/payments/ledger').holders[0]!;
    expect(next.token).toBeGreaterThan(lostToken);
    // Without the raise the same entry would have taken a token the lost cell had handed out already.
    expect(next.token - raise).toBeLessThanOrEqual(lostToken);
  });

  it('refuses a raise below 1, no members, a bad member address, and a damaged snapshot', () => {
    const snapshot = busyCell().cell.fsm.snapshot();
    expect(() => rewriteSnapshotForRestore(snapshot, { revisionRaise: 0, members: NEW_MEMBERS })).toThrow(DecodeError);
    expect(() => rewriteSnapshotForRestore(snapshot, { revisionRaise: 1.5, members: NEW_MEMBERS })).toThrow(/integer >= 1/);
    expect(() => rewriteSnapshotForRestore(snapshot, { revisionRaise: 1, members: new Map() })).toThrow(/at least one member/);
    const bad = new Map([['n1', { address: 'nowhere', peerAddress: '10.1.0.1:7301' }]]);
    expect(() => rewriteSnapshotForRestore(snapshot, { revisionRaise: 1, members: bad })).toThrow(/member n1/);
    expect(() => rewriteSnapshotForRestore(snapshot, { revisionRaise: Number.MAX_SAFE_INTEGER - 10, members: NEW_MEMBERS })).toThrow(
      /no room below 2\^53/,
    );
    const damaged = snapshot.slice(0, snapshot.length - 3);
    expect(() => rewriteSnapshotForRestore(damaged, { revisionRaise: 1, members: NEW_MEMBERS })).toThrow(DecodeError);
    expect(() => readSnapshotHead(new Uint8Array([99, 1, 1]))).toThrow(/unknown snapshot format version 99/);
  });
});

/**
 * Goal: what a cell does for a live tenant move
 * (docs/decisions/0019-the-move-worker.md): a freeze ends the namespace's
 * held Acquires (NAMESPACE_MOVING) and holds none again while frozen,
 * answers no read while frozen, extends no lease while frozen, and ends its watchers after a PROGRESS at
 * the freeze; the cell it moves to
 * tracks the imported sessions (a fresh TTL) and waits (what was left of
 * them) at once, resumes a watch from the freeze revision across the move
 * with no gap even below its own history floor, and times the first write
 * after the unfreeze; the old cell forgets the dropped sessions without
 * calling them expired.
 * Method: two three-replica cells (test/harness.ts) on manual clocks; the
 * export goes from one leader's state to the other's log as a move worker
 * would carry it.
 */
import { describe, expect, it } from 'vitest';
import { type FencerError, Namespace } from '@fencer/base';
import { Harness, answer, openSession } from '../test/harness.js';
import type { HubEvent, WatchSink } from './watch-hub.js';
import { WIRE_MODE } from './wire.js';

const NS = Namespace('pay');

type AcquireAnswer = { status: number; token: number };

function acquire(h: Harness, via: string, sessionId: string, name: string, requestId: string, waitMs: number) {
  const a = answer<AcquireAnswer>();
  h.cell(via).call(
    'acquire',
    { sessionId, name, mode: WIRE_MODE.EXCLUSIVE, waitMs, requestId, lockDelayMs: 0 },
    { forwarded: false },
    a.done,
  );
  h.pump();
  return a;
}

function recordingSink(): WatchSink & { events: HubEvent[]; ended: (string | undefined)[] } {
  const events: HubEvent[] = [];
  const ended: (string | undefined)[] = [];
  return { events, ended, write: (e) => (events.push(e), 0), end: (reason) => void ended.push(reason) };
}

function propose(h: Harness, leader: string, command: Parameters<ReturnType<Harness['cell']>['propose']>[0]): unknown {
  let outcome: unknown;
  h.cell(leader).propose(command, (r) => {
    if (!r.ok) throw r.error;
    outcome = r.value.result;
  });
  h.pump();
  // A heartbeat round carries the commit index to the followers, which apply it too.
  h.advance(200);
  return outcome;
}

/** A managed source cell owning NS, with a holder of /ls/pay/x and a held waiter for it. */
function sourceCell() {
  const h = new Harness({}, false);
  h.elect('c1');
  propose(h, 'c1', { kind: 'ClaimNamespace', namespace: NS });
  const a = openSession(h, 'c2', NS);
  const b = openSession(h, 'c3', NS);
  const held = acquire(h, 'c2', a, '/ls/pay/x', 'a1', 0);
  const waiting = acquire(h, 'c3', b, '/ls/pay/x', 'b1', 60_000);
  return { h, a, b, held, waiting };
}

describe('a freeze on the source', () => {
  it('ends held Acquires with NAMESPACE_MOVING, holds no retry while frozen, and answers it again after an unfreeze', () => {
    const { h, b, held, waiting } = sourceCell();
    expect(held.got[0]!.ok).toBe(true);
    expect(waiting.got).toEqual([]);
    propose(h, 'c1', { kind: 'FreezeNamespace', namespace: NS });
    expect(waiting.got.map((r) => !r.ok && r.error.code)).toEqual(['NAMESPACE_MOVING']);
    // The retry is answered from its dedupe record (QUEUED), and not held: NAMESPACE_MOVING at once.
    const retry = acquire(h, 'c1', b, '/ls/pay/x', 'b1', 60_000);
    expect(retry.got.map((r) => !r.ok && r.error.code)).toEqual(['NAMESPACE_MOVING']);
    propose(h, 'c1', { kind: 'UnfreezeNamespace', namespace: NS });
    const after = acquire(h, 'c1', b, '/ls/pay/x', 'b1', 60_000);
    expect(after.got).toEqual([]);
    expect(
      h
        .cell('c1')
        .fsm.getLock('/ls/pay/x')
        .waiters.map((w) => w.requestId),
    ).toEqual(['b1']);
  });

  it('answers no read of a frozen namespace (NAMESPACE_MOVING), and does again after an unfreeze', () => {
    const { h } = sourceCell();
    const read = (): { code: string | false; revision?: number } => {
      const got = answer<{ revision: number }>();
      h.cell('c1').call('getLock', { name: '/ls/pay/x' }, { forwarded: false }, got.done);
      h.advance(200);
      const r = got.got[0]!;
      return r.ok ? { code: false, revision: r.value.revision } : { code: r.error.code };
    };
    expect(read().code).toBe(false);
    propose(h, 'c1', { kind: 'FreezeNamespace', namespace: NS });
    expect(read()).toEqual({ code: 'NAMESPACE_MOVING' });
    propose(h, 'c1', { kind: 'UnfreezeNamespace', namespace: NS });
    expect(read().code).toBe(false);
  });

  it('acknowledges no heartbeat of a frozen session (no TTL, not expired), and does again after an unfreeze', () => {
    const { h, a } = sourceCell();
    const beat = (): { ttlMsRemaining: number; expired: boolean } | undefined => {
      const got = answer<{ ttlMsRemaining: number; expired: boolean }[]>();
      h.cell('c1').heartbeat([a], { forwarded: false }, got.done);
      h.advance(200);
      const r = got.got[0];
      return r?.ok ? r.value[0] : undefined;
    };
    expect(beat()?.ttlMsRemaining).toBeGreaterThan(0);
    propose(h, 'c1', { kind: 'FreezeNamespace', namespace: NS });
    expect(beat()).toEqual({ sessionId: a, ttlMsRemaining: 0, expired: false });
    propose(h, 'c1', { kind: 'UnfreezeNamespace', namespace: NS });
    expect(beat()?.ttlMsRemaining).toBeGreaterThan(0);
  });

  it('ends its watchers after a PROGRESS at the freeze, refuses new ones while frozen, and leaves other namespaces watched', () => {
    const { h } = sourceCell();
    propose(h, 'c1', { kind: 'ClaimNamespace', namespace: Namespace('other') });
    const mine = recordingSink();
    const theirs = recordingSink();
    const started: (FencerError | null)[] = [];
    h.cell('c2').watch({ name: '/ls/pay/', prefix: true, sinceRevision: 0 }, mine, (e) => started.push(e));
    h.cell('c2').watch({ name: '/ls/other/', prefix: true, sinceRevision: 0 }, theirs, (e) => started.push(e));
    h.pump();
    expect(started).toEqual([null, null]);
    propose(h, 'c1', { kind: 'FreezeNamespace', namespace: NS });
    const frozenAt = h.cell('c2').fsm.namespaceInfo(NS)!.lastRevision;
    expect(mine.events.at(-1)).toEqual({ type: 'progress', revision: frozenAt });
    expect(mine.ended).toEqual(['moving']);
    expect(theirs.ended).toEqual([]);
    const again: (FencerError | null)[] = [];
    h.cell('c2').watch({ name: '/ls/pay/', prefix: true, sinceRevision: frozenAt }, recordingSink(), (e) => again.push(e));
    h.pump();
    expect(again.map((e) => e?.code)).toEqual(['NAMESPACE_MOVING']);
  });
});

describe('a move from one cell to another', () => {
  it('tracks imported sessions and waits on the target at once, resumes a watch across the move, and forgets them on the source', () => {
    const { h: source, a, b } = sourceCell();
    source.advance(5_000); // the waiter has about 55 s left of its 60 s
    propose(source, 'c1', { kind: 'FreezeNamespace', namespace: NS });
    const frozenAt = source.cell('c1').fsm.namespaceInfo(NS)!.lastRevision;
    const exported = source.cell('c1').fsm.readExport(NS);
    if (!exported.ok) throw new Error(exported.code);
    const left = source.cell('c1').waitsLeft(NS);
    expect([...left.values()]).toHaveLength(1);
    expect([...left.values()][0]).toBeLessThanOrEqual(55_000);

    // The target's own history runs far ahead, past its ring: its floor lies above the source's revisions.
    const target = new Harness({}, false);
    target.elect('c1');
    propose(target, 'c1', { kind: 'ClaimNamespace', namespace: Namespace('busy') });
    const busy = openSession(target, 'c1', 'busy');
    for (let i = 0; i < 120; i++) acquire(target, 'c1', busy, `/ls/busy/k${i}`, `k${i}`, 0);
    expect(target.cell('c2').fsm.revision).toBeGreaterThan(frozenAt + 100);

    target.cell('c1').moves.carryWaits(NS, left);
    propose(target, 'c1', { kind: 'ImportNamespace', namespace: NS, data: exported.data, activate: false });
    // Sessions get a fresh TTL at once (no heartbeat answered with 0 TTL), waits what was left of them.
    const beat = answer<{ ttlMsRemaining: number; expired: boolean }[]>();
    target.cell('c1').heartbeat([a, b], { forwarded: false }, beat.done as never);
    target.pump();
    expect(beat.got[0]!.ok && beat.got[0]!.value.map((x) => x.ttlMsRemaining > 0)).toEqual([true, true]);
    const waitLeft = [...target.cell('c1').waitsLeft(NS).values()];
    expect(waitLeft).toHaveLength(1);
    expect(waitLeft[0]).toBeLessThanOrEqual(55_000);

    propose(target, 'c1', { kind: 'UnfreezeNamespace', namespace: NS });
    const sink = recordingSink();
    const started: (FencerError | null)[] = [];
    target.cell('c3').watch({ name: '/ls/pay/', prefix: true, sinceRevision: frozenAt }, sink, (e) => started.push(e));
    target.pump();
    expect(started).toEqual([null]);
    target.advance(1_000);
    const release = answer<{ ok: boolean }>();
    const token = source.cell('c1').fsm.getLock('/ls/pay/x').holders[0]!.token;
    target.cell('c2').call('release', { sessionId: a, name: '/ls/pay/x', token }, { forwarded: false }, release.done);
    target.pump();
    target.advance(200);
    const events = sink.events.filter((e) => e.type === 'event').map((e) => (e.type === 'event' ? e.event : undefined)!);
    expect(events.map((e) => [e.type, e.sessionId])).toEqual([
      ['RELEASED', a],
      ['ACQUIRED', b],
    ]);
    expect(events[1]!.token).toBeGreaterThan(exported.highestRevision);
    // The first write after the unfreeze is timed on the leader: 1.2 s of manual clock after it (the unfreeze's
    // commit round, then the pause above).
    expect(target.cell('c1').moves.unfreeze(NS, target.clock.monoMs())?.firstWriteAfterMs).toBe(1_200);

    // The source drops the namespace: its leader stops tracking the sessions, and does not call them expired.
    propose(source, 'c1', { kind: 'DropNamespace', namespace: NS });
    const old = answer<{ ttlMsRemaining: number; expired: boolean }[]>();
    source.cell('c1').heartbeat([a], { forwarded: false }, old.done as never);
    source.pump();
    expect(old.got[0]!.ok && old.got[0]!.value).toEqual([{ sessionId: a, ttlMsRemaining: 0, expired: false }]);
    expect(source.cell('c1').waitsLeft(NS).size).toBe(0);
  });

  it('without the import point a resume below the floor is COMPACTED (the check the move relies on)', () => {
    const target = new Harness({}, false);
    target.elect('c1');
    propose(target, 'c1', { kind: 'ClaimNamespace', namespace: NS });
    const s = openSession(target, 'c1', NS);
    for (let i = 0; i < 120; i++) acquire(target, 'c1', s, `/ls/pay/k${i}`, `k${i}`, 0);
    const started: (FencerError | null)[] = [];
    target.cell('c2').watch({ name: '/ls/pay/', prefix: true, sinceRevision: 3 }, recordingSink(), (e) => started.push(e));
    target.pump();
    expect(started.map((e) => e?.code)).toEqual(['COMPACTED']);
  });
});

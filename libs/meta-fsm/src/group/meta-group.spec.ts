/**
 * Goal: the meta group's own layer over GroupCore does what the HTTP app
 * relies on: a write's callback gets the machine's outcome once applied, a
 * read barrier passes on the leader, the leader's address comes from the
 * member directory, and a routing wait ends exactly once, when the version
 * passes or at its deadline (also past the environment's longest timer),
 * never after a cancel, and is refused past META_ROUTING_WAITERS_MAX.
 * Method: one member over @fencer/wal's MemDisk in virtual time: a hand-run
 * timer queue as `env.after`, the disk's queue drained between steps.
 */
import { describe, expect, it } from 'vitest';
import { FencerError, NodeId, SeededRandom } from '@fencer/base';
import { TIMER_DELAY_MS_MAX } from '@fencer/group';
import { openRaftLogStore, type WalStore } from '@fencer/wal';
import { MemDisk } from '@fencer/wal/testing';
import { META_ROUTING_WAITERS_MAX, MetaGroup } from './index.js';

const ID = NodeId('cp1');

function world() {
  let nowMs = 0;
  const timers: { atMs: number; run: () => void; live: boolean }[] = [];
  const disk = new MemDisk();
  let store: WalStore | undefined;
  openRaftLogStore(disk, '/meta', {}, (err, s) => {
    if (err) throw err;
    store = s;
  });
  disk.runPending();
  if (!store) throw new Error('the store did not open');
  const group = new MetaGroup({ id: ID, peers: new Map([[ID, 'http://cp1.test']]), raft: { electionTicks: 4 } }, store, {
    clock: { monoMs: () => nowMs, wallMs: () => 1_700_000_000_000 + nowMs },
    random: new SeededRandom(1),
    send: () => {},
    onFatal: (e) => {
      throw e;
    },
    after: (ms, run) => {
      expect(ms).toBeLessThanOrEqual(TIMER_DELAY_MS_MAX);
      const t = { atMs: nowMs + ms, run, live: true };
      timers.push(t);
      return () => {
        t.live = false;
      };
    },
  });
  const runDue = (): void => {
    for (let due = timers.filter((t) => t.live && t.atMs <= nowMs); due.length > 0; due = timers.filter((t) => t.live && t.atMs <= nowMs)) {
      for (const t of due) {
        t.live = false;
        t.run();
      }
    }
  };
  /** Advances virtual time by `ms` in 10 ms ticks, running due timers and the disk. */
  const advance = (ms: number): void => {
    const endMs = nowMs + ms;
    while (nowMs < endMs) {
      nowMs = Math.min(endMs, nowMs + 10);
      group.tick();
      runDue();
      disk.runPending();
    }
  };
  /** Jumps virtual time by `ms` without ticking Raft (timers only): for waits of weeks. */
  const jump = (ms: number): void => {
    nowMs += ms;
    runDue();
  };
  group.replica.campaign();
  for (let i = 0; i < 100 && !group.isLeader; i++) advance(10);
  expect(group.isLeader).toBe(true);
  return { group, advance, jump };
}

function create(group: MetaGroup, namespace: string): { done: boolean; created: boolean } {
  const seen = { done: false, created: false };
  group.propose({ command: { kind: 'CreateTenant', namespace, cell: 'cell-1', atMs: 1 } }, (r) => {
    seen.done = true;
    seen.created = r.ok && 'tenant' in r.value.outcome;
  });
  return seen;
}

describe('MetaGroup on GroupCore', () => {
  it('applies a write, passes a read barrier, and names the leader by its directory address', () => {
    const { group, advance } = world();
    const seen = create(group, 'payments');
    advance(50);
    expect(seen).toEqual({ done: true, created: true });
    expect(group.state.tenant('payments')?.cell).toBe('cell-1');
    let barrier: FencerError | null | undefined;
    group.readBarrier((e) => (barrier = e));
    advance(50);
    expect(barrier).toBeNull();
    expect(group.leaderAddress()).toBe('http://cp1.test');
  });

  it('a routing wait ends once when the version passes, at its deadline, or never after a cancel', () => {
    const { group, advance } = world();
    const since = group.state.routingVersion;
    let passed = 0;
    let timedOut = 0;
    let cancelled = 0;
    group.waitRouting(since, 60_000, () => passed++);
    group.waitRouting(since + 5, 200, () => timedOut++);
    const cancel = group.waitRouting(since, 60_000, () => cancelled++);
    cancel();
    create(group, 'search');
    advance(50);
    expect([passed, timedOut, cancelled]).toEqual([1, 0, 0]);
    advance(300);
    expect([passed, timedOut, cancelled]).toEqual([1, 1, 0]);
    // Already past: at once.
    let now = 0;
    group.waitRouting(since, 1_000, () => now++);
    expect(now).toBe(1);
  });

  it('a wait longer than the longest timer is chained, not cut short', () => {
    const { group, jump } = world();
    let done = 0;
    group.waitRouting(group.state.routingVersion, TIMER_DELAY_MS_MAX + 500, () => done++);
    jump(TIMER_DELAY_MS_MAX);
    expect(done).toBe(0);
    jump(499);
    expect(done).toBe(0);
    jump(1);
    expect(done).toBe(1);
  });

  it('refuses waits past META_ROUTING_WAITERS_MAX with TOO_MANY_REQUESTS', () => {
    const { group } = world();
    const cancels = Array.from({ length: META_ROUTING_WAITERS_MAX }, () => group.waitRouting(1_000, 60_000, () => {}));
    expect(() => group.waitRouting(1_000, 60_000, () => {})).toThrow(expect.objectContaining({ code: 'TOO_MANY_REQUESTS' }));
    cancels[0]!();
    expect(() => group.waitRouting(1_000, 60_000, () => {})).not.toThrow();
  });
});

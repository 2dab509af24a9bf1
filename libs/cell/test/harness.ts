/**
 * A test harness of one lock cell: three LockCells over the production log
 * store on in-memory disks, a manual clock, fake timers that record every
 * delay they are given, and a forwarder and network that deliver when the
 * test pumps them.
 */
import { expect } from 'vitest';
import { type FencerError, ManualClock, NodeId, type Result, SeededRandom } from '@fencer/base';
import type { Message } from '@fencer/raft';
import { noopLogger } from '@fencer/replica';
import { MemDisk, type RaftLogStore, openRaftLogStore } from '@fencer/wal';
import type { Cancel } from '@fencer/group';
import type { LockCellConfig, LockCellTestHooks } from '../src/config.js';
import type { CellEnv } from '../src/env.js';
import { noopCellMetrics } from '../src/env.js';
import { LockCell } from '../src/lock-cell.js';
import type { LeaderForwarder } from '../src/request-api.js';

export class Harness {
  readonly ids = ['c1', 'c2', 'c3'].map((id) => NodeId(id));
  readonly clock = new ManualClock(1_000);
  readonly cells = new Map<string, LockCell>();
  readonly disks = new Map<string, MemDisk>();
  readonly delays: number[] = [];
  private readonly timers: { atMs: number; run: () => void; live: boolean }[] = [];
  private readonly inbox: Message[] = [];
  private readonly calls: (() => void)[] = [];
  readonly isolated = new Set<string>();
  /** Every heartbeat batch a follower relayed: from, to, session ids. */
  readonly relayed: { from: string; to: string; ids: readonly string[] }[] = [];

  constructor(
    hooks: LockCellTestHooks = {},
    private readonly autoClaim = true,
  ) {
    for (const id of this.ids) {
      const disk = new MemDisk();
      this.disks.set(id, disk);
      let store: RaftLogStore | undefined;
      openRaftLogStore(disk, '/raft', {}, (err, s) => {
        if (err) throw err;
        store = s;
      });
      disk.runPending();
      this.cells.set(id, new LockCell(this.config(id), store!, this.env(id), this.forwarder(id), hooks));
    }
  }

  private config(id: NodeId): LockCellConfig {
    return {
      id,
      peers: new Map(this.ids.map((p) => [p, `${p}:7001`])),
      join: false,
      replica: { raft: { electionTicks: 10, heartbeatTicks: 1 } },
      readsWaitingMax: 100,
      defaultPeerAddress: (a) => a.replace(':7001', ':7301'),
      tickMs: 100,
      ttlDefaultMs: 5_000,
      ttlMinMs: 1_000,
      ttlMaxMs: 60_000,
      waitingCallsMax: 100,
      watchHistoryMax: 100,
      watcherBufferMax: 100,
      watchersMax: 10,
      watchProgressMs: 1_000,
      heartbeatRoundSpacingMs: 0,
      autoClaim: this.autoClaim,
    };
  }

  private env(id: NodeId): CellEnv {
    return {
      clock: this.clock,
      random: new SeededRandom(this.ids.indexOf(id) + 7),
      logger: noopLogger,
      metrics: noopCellMetrics,
      send: (messages) => this.inbox.push(...messages),
      onFatal: (error) => {
        throw error;
      },
      after: (ms, run): Cancel => {
        this.delays.push(ms);
        const t = { atMs: this.clock.monoMs() + ms, run, live: true };
        this.timers.push(t);
        return () => (t.live = false);
      },
    };
  }

  private forwarder(from: NodeId): LeaderForwarder {
    const relay = (leader: NodeId, send: (cell: LockCell, back: (answer: () => void) => void) => void): Cancel => {
      let live = true;
      if (this.isolated.has(from) || this.isolated.has(leader)) return () => {};
      this.calls.push(() => send(this.cell(leader), (answer) => this.calls.push(() => live && answer())));
      return () => (live = false);
    };
    return {
      forward: (leader, _address, method, request, done) =>
        relay(leader, (cell, back) => cell.call(method, request, { forwarded: true }, (o, r) => back(() => done(o, r)))),
      heartbeats: (leader, _address, ids, done) => {
        this.relayed.push({ from, to: leader, ids: [...ids] });
        return relay(leader, (cell, back) => cell.heartbeat(ids, { forwarded: true }, (r) => back(() => done(r))));
      },
    };
  }

  cell(id: string): LockCell {
    return this.cells.get(id)!;
  }

  /** Delivers messages and calls and completes disk writes until nothing moves. */
  pump(): void {
    for (let i = 0; i < 10_000; i++) {
      let moved = 0;
      for (const disk of this.disks.values()) moved += disk.runPending();
      for (const m of this.inbox.splice(0)) {
        moved++;
        if (this.isolated.has(m.from) || this.isolated.has(m.to)) continue;
        this.cell(m.to).core.replica.receive(m);
      }
      for (const call of this.calls.splice(0)) {
        moved++;
        call();
      }
      if (moved === 0) return;
    }
    throw new Error('the cell did not settle');
  }

  /** Moves the clock by `ms` in ticks, firing timers and ticking every cell. */
  advance(ms: number): void {
    for (let t = 0; t < ms; t += 100) {
      this.clock.advance(100);
      for (const cell of this.cells.values()) cell.tick();
      for (const timer of [...this.timers]) {
        if (timer.live && timer.atMs <= this.clock.monoMs()) {
          timer.live = false;
          timer.run();
        }
      }
      this.pump();
    }
  }

  elect(id: string): void {
    this.cell(id).core.replica.campaign();
    this.pump();
    this.advance(300);
    expect(this.cell(id).isLeader).toBe(true);
  }
}

export function answer<T>(): { done: (r: Result<T, FencerError>) => void; got: Result<T, FencerError>[] } {
  const got: Result<T, FencerError>[] = [];
  return { done: (r) => got.push(r), got };
}

export function openSession(h: Harness, via: string, namespace: string): string {
  const a = answer<{ sessionId: string }>();
  h.cell(via).call('openSession', { namespace, clientId: 't', ttlMs: 30_000 }, { forwarded: false }, a.done);
  h.pump();
  const r = a.got[0]!;
  if (!r.ok) throw r.error;
  return r.value.sessionId;
}

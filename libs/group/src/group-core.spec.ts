/**
 * Goal: a GroupCore keeps its promises to the state-machine layer above it:
 * constructing it calls nothing back (neither the adapter nor GroupEvents),
 * so the layer can finish building itself; open() then restores the
 * snapshot and replays the entries above it, in that order; a proposal's
 * callback gets the machine's result; reads past readsWaitingMax are
 * refused; GroupEvents hears of leadership once per change.
 * Method: one member over @fencer/wal's MemDisk, a recording state
 * machine, a manual clock; the disk's queue is drained between steps. A
 * replica subclass holds ReadIndex requests until the test releases them.
 */
import { describe, expect, it } from 'vitest';
import { FencerError, ManualClock, NodeId, SeededRandom } from '@fencer/base';
import type { Entry } from '@fencer/raft';
import { type ReadCallback, Replica, noopLogger, type StateMachine } from '@fencer/replica';
import { MemDisk, openRaftLogStore, type RaftLogStore } from '@fencer/wal';
import { noopGroupMetrics } from './env.js';
import { type GroupConfig, GroupCore, type ReplicaFactory } from './group-core.js';

const ID = NodeId('g1');
const enc = new TextEncoder();

/** Counts commands; records every call the replica makes, in order. */
class Recorder implements StateMachine {
  count = 0;
  readonly calls: string[] = [];
  apply(entry: Entry): unknown {
    this.calls.push(`apply ${entry.index}`);
    return ++this.count;
  }
  snapshot(): Uint8Array {
    return enc.encode(String(this.count));
  }
  restore(data: Uint8Array): void {
    this.calls.push('restore');
    this.count = Number(new TextDecoder().decode(data));
  }
}

function openStore(disk: MemDisk): RaftLogStore {
  let store: RaftLogStore | undefined;
  openRaftLogStore(disk, '/group', {}, (e, s) => {
    if (e) throw e;
    store = s;
  });
  disk.runPending();
  if (!store) throw new Error('the store did not open');
  return store;
}

function member(disk: MemDisk, readsWaitingMax = 10, makeReplica?: ReplicaFactory) {
  const machine = new Recorder();
  const events: string[] = [];
  const config: GroupConfig = {
    id: ID,
    peers: new Map([[ID, 'g1:7001']]),
    join: false,
    replica: { raft: { electionTicks: 4 }, snapshotEveryEntries: 3 },
    readsWaitingMax,
    defaultPeerAddress: (a) => a,
  };
  const core = new GroupCore(
    config,
    openStore(disk),
    machine,
    {
      clock: new ManualClock(),
      random: new SeededRandom(1),
      logger: noopLogger,
      metrics: noopGroupMetrics,
      send: () => {},
      onFatal: (e) => {
        throw e;
      },
      after: () => () => {},
    },
    { becameLeader: () => events.push('becameLeader'), steppedDown: () => events.push('steppedDown') },
    makeReplica,
  );
  return { core, machine, events };
}

function lead(disk: MemDisk, core: GroupCore): void {
  core.replica.campaign();
  for (let i = 0; i < 20 && !core.isLeader; i++) {
    disk.runPending();
    core.tick();
  }
  disk.runPending();
  expect(core.isLeader).toBe(true);
}

/** A replica whose ReadIndex requests wait until the test releases them (a round that does not complete at once). */
class HeldReads extends Replica {
  readonly held: (() => void)[] = [];
  override readIndex(done: ReadCallback): void {
    this.held.push(() => super.readIndex(done));
  }
}

describe('GroupCore', () => {
  it('calls nothing back while it is constructed; open() restores the snapshot, then replays the entries above it', () => {
    const disk = new MemDisk();
    const first = member(disk);
    first.core.open();
    lead(disk, first.core);
    const results: unknown[] = [];
    for (let i = 0; i < 5; i++) first.core.propose(enc.encode(`c${i}`), (r) => results.push(r.ok && r.value.result));
    for (let i = 0; i < 10; i++) disk.runPending();
    expect(results).toEqual([1, 2, 3, 4, 5]);
    expect(first.events).toEqual(['becameLeader']);
    first.core.replica.stop();

    const again = member(disk);
    expect(again.machine.calls).toEqual([]);
    expect(again.events).toEqual([]);
    again.core.open();
    const snapshotIndex = again.core.replica.latestSnapshotIndex;
    expect(snapshotIndex).toBeGreaterThan(0);
    expect(again.machine.calls).toEqual(['restore']);
    // The entries above the snapshot apply once the member knows they are committed: as leader again.
    lead(disk, again.core);
    for (let i = 0; i < 10; i++) disk.runPending();
    expect(again.machine.calls.slice(1)).toEqual(
      Array.from({ length: again.machine.calls.length - 1 }, (_, i) => `apply ${snapshotIndex + 1 + i}`),
    );
    expect(again.machine.count).toBe(5);
  });

  it('refuses reads past readsWaitingMax with TOO_MANY_REQUESTS, and passes the others once their rounds confirm', () => {
    const disk = new MemDisk();
    let replica: HeldReads | undefined;
    const { core } = member(disk, 2, (config, store, machine, env) => (replica = new HeldReads(config, store, machine, env)));
    core.open();
    lead(disk, core);
    const outcomes: (string | null)[] = [];
    for (let i = 0; i < 4; i++) core.readBarrier((e: FencerError | null) => outcomes.push(e?.code ?? null));
    // The first read's round is in flight; the next two wait for the following round; the fourth is refused at once.
    expect(outcomes).toEqual(['TOO_MANY_REQUESTS']);
    for (let round = 0; round < 2; round++) {
      expect(replica!.held).toHaveLength(1);
      replica!.held.shift()!();
      disk.runPending();
    }
    expect(outcomes).toEqual(['TOO_MANY_REQUESTS', null, null, null]);
    expect(replica!.held).toHaveLength(0);
  });
});

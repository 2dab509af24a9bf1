/**
 * Goal: the replica composes core, store and state machine in the one safe
 * order (and each of its three reorderings moves only what it claims to),
 * and keeps its promises to proposers and readers: results on apply,
 * NOT_LEADER / OUTCOME_UNKNOWN / TOO_MANY_REQUESTS when it must, snapshots
 * by policy, recovery on restart, a stop on an fsync error. Messages from
 * the network that the core refuses are dropped and counted, never thrown;
 * the core runs with raft's one set of defaults unless overridden.
 * Method: small cells of real replicas over the production store on an
 * in-memory disk whose completions wait until the test runs them, and a
 * hand-driven network (FIFO delivery, links cut by the test).
 */
import { describe, expect, it } from 'vitest';
import { AssertionError, ErrorCode, FencerError, ManualClock, NodeId, SeededRandom, Term, type LogIndex } from '@fencer/base';
import { DropReason, MessageType, raftTuningDefault, type Entry, type Message } from '@fencer/raft';
import { MemDisk, openRaftLogStore, type RaftLogStore } from '@fencer/wal';
import { Replica, proposeAsync, readIndexAsync, type Applied, type ReplicaConfig } from './index.js';
import { createReplica } from './testing.js';
import type { StateMachine } from './state-machine.js';
import { pendingProposalsMax } from './limits.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Appends each command's text; apply returns how many commands it holds. */
class ListMachine implements StateMachine {
  items: string[] = [];
  /** Every call the replica made, in order: 'restore', or the applied entry's index. */
  readonly calls: (number | 'restore')[] = [];
  apply(entry: Entry): unknown {
    this.calls.push(entry.index);
    this.items.push(dec.decode(entry.data));
    return this.items.length;
  }
  snapshot(): Uint8Array {
    return enc.encode(JSON.stringify(this.items));
  }
  restore(data: Uint8Array): void {
    this.calls.push('restore');
    this.items = JSON.parse(dec.decode(data)) as string[];
  }
}

interface Member {
  replica: Replica;
  machine: ListMachine;
  store: RaftLogStore;
  sent: Message[];
}

class Cell {
  readonly ids: NodeId[];
  readonly disks = new Map<string, MemDisk>();
  readonly members = new Map<string, Member>();
  readonly inbox: Message[] = [];
  /** Nodes whose messages (both ways) are dropped. */
  readonly isolated = new Set<string>();
  fatal: Error | null = null;
  /** Every labelled counter increment any member reported. */
  readonly labelled: { id: string; name: string; labels: Readonly<Record<string, string>> }[] = [];

  constructor(
    size: number,
    private readonly config: Partial<ReplicaConfig> = {},
  ) {
    this.ids = Array.from({ length: size }, (_, i) => NodeId(`r${i + 1}`));
    for (const id of this.ids) {
      this.disks.set(id, new MemDisk());
      this.start(id);
    }
  }

  /** Starts (or restarts) a member over its disk; `open: false` leaves its replica constructed but not opened. */
  start(id: NodeId, { open = true }: { open?: boolean } = {}): Member {
    const disk = this.disks.get(id) as MemDisk;
    let store: RaftLogStore | undefined;
    openRaftLogStore(disk, '/raft', { segmentBytesMax: 16 * 1024 }, (err, s) => {
      if (err) throw err;
      store = s;
    });
    disk.runPending();
    if (!store) throw new Error('store did not open');
    const machine = new ListMachine();
    const sent: Message[] = [];
    const replica = createReplica({ id, peers: this.ids, ...this.config }, store, machine, {
      clock: new ManualClock(),
      random: new SeededRandom(this.ids.indexOf(id) + 1),
      transport: {
        send: (messages) => {
          sent.push(...messages);
          this.inbox.push(...messages);
        },
      },
      onFatal: (error) => {
        this.fatal = error;
      },
      metrics: {
        inc: (name, _by, labels) => {
          if (labels !== undefined) this.labelled.push({ id, name, labels });
        },
        observe() {},
      },
    });
    const m = { replica, machine, store, sent };
    this.members.set(id, m);
    if (open) replica.open();
    return m;
  }

  get(id: string): Member {
    const m = this.members.get(id);
    if (!m) throw new Error(`no member ${id}`);
    return m;
  }

  /** Delivers messages and completes disk operations until nothing moves (bounded). */
  pump(rounds = 10_000): void {
    for (let i = 0; i < rounds; i++) {
      let moved = 0;
      for (const disk of this.disks.values()) moved += disk.runPending();
      const batch = this.inbox.splice(0);
      for (const m of batch) {
        moved++;
        if (this.isolated.has(m.from) || this.isolated.has(m.to)) continue;
        const to = this.members.get(m.to);
        if (to && !to.replica.stopped) to.replica.receive(m);
      }
      if (moved === 0) return;
    }
    throw new Error('the cell did not settle');
  }

  tick(times = 1): void {
    for (let t = 0; t < times; t++) {
      for (const m of this.members.values()) if (!m.replica.stopped) m.replica.tick();
      this.pump();
    }
  }

  /** Elects `id` by campaigning it and letting the cell settle. */
  elect(id: string): Member {
    const m = this.get(id);
    m.replica.campaign();
    this.pump();
    this.tick(2);
    expect(m.replica.isLeader).toBe(true);
    return m;
  }

  propose(id: string, text: string): { outcome: Applied | FencerError | null } {
    const box: { outcome: Applied | FencerError | null } = { outcome: null };
    this.get(id).replica.propose(enc.encode(text), (o) => {
      box.outcome = o.ok ? o.value : o.error;
    });
    return box;
  }
}

describe('ready handling: persist, then send, then apply, then advance', () => {
  it('sends nothing of a ready before its fsync completes', () => {
    const cell = new Cell(3);
    const r1 = cell.get('r1');
    r1.replica.campaign();
    // The campaign's ready carries a new term and vote: persisted first, messages held back.
    expect(r1.sent).toHaveLength(0);
    const disk = cell.disks.get('r1') as MemDisk;
    expect(disk.pendingCount).toBeGreaterThan(0);
    disk.runPending();
    expect(r1.sent.map((m) => m.type)).toContain(MessageType.PreVote);
  });

  it('with the ackBeforeFsync bug planted (testing export), sends before the fsync (the bug the simulator must catch)', () => {
    const cell = new Cell(3, { bugs: { ackBeforeFsync: true } });
    const r1 = cell.get('r1');
    r1.replica.campaign();
    expect(r1.sent.length).toBeGreaterThan(0);
    expect((cell.disks.get('r1') as MemDisk).pendingCount).toBeGreaterThan(0);
  });

  it('applies a committed entry only after it is durable here, and in index order everywhere', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    const boxes = ['a', 'b', 'c'].map((t) => cell.propose('r1', t));
    cell.pump();
    cell.tick(2);
    for (const id of cell.ids) expect(cell.get(id).machine.items).toEqual(['a', 'b', 'c']);
    const results = boxes.map((b) => b.outcome as Applied);
    expect(results.map((r) => r.result)).toEqual([1, 2, 3]);
    expect(results[1]?.index).toBe((results[0]?.index as number) + 1);
  });
});

describe('the three reorderings of handleOneReady, each where it protects nothing', () => {
  /** r1 leads; r3 is cut off, so every commit needs r1's own durable copy. Records when r1's saves become durable. */
  function leaderWithOneFollower(): { cell: Cell; durable: Set<string>; deliver: (to: string) => void } {
    const cell = new Cell(3);
    cell.elect('r1');
    cell.isolated.add('r3');
    const durable = new Set<string>();
    const store = cell.get('r1').store;
    const save = store.save.bind(store);
    store.save = (hs, entries, done) =>
      save(hs, entries, (e) => {
        for (const entry of entries) durable.add(dec.decode(entry.data));
        done(e);
      });
    const deliver = (to: string): void => {
      for (const m of cell.inbox.splice(0)) if (m.to === to) cell.get(to).replica.receive(m);
    };
    return { cell, durable, deliver };
  }

  it("1: a leader's appends leave before its own fsync, and its own copy counts toward the commit only once durable", () => {
    const { cell, durable, deliver } = leaderWithOneFollower();
    const box = cell.propose('r1', 'x');
    expect(durable.has('x')).toBe(false);
    expect(cell.inbox.some((m) => m.to === 'r2' && m.type === MessageType.AppendEntries && (m.entries ?? []).length > 0)).toBe(true);
    deliver('r2');
    (cell.disks.get('r2') as MemDisk).runPending();
    deliver('r1');
    // r2's durable copy alone is no majority of three.
    expect(box.outcome).toBeNull();
    expect(cell.get('r1').machine.items).toEqual([]);
    (cell.disks.get('r1') as MemDisk).runPending();
    expect(durable.has('x')).toBe(true);
    expect((box.outcome as Applied).result).toBe(1);
  });

  it("2: a leader applies entries durable before the ready while that ready's own fsync runs", () => {
    const { cell, durable, deliver } = leaderWithOneFollower();
    const x = cell.propose('r1', 'x');
    deliver('r2');
    (cell.disks.get('r2') as MemDisk).runPending();
    // y is proposed while x's fsync is still out: it waits for the next ready.
    cell.propose('r1', 'y');
    deliver('r1');
    const r1 = cell.get('r1');
    const seenAtApply: boolean[] = [];
    const apply = r1.machine.apply.bind(r1.machine);
    r1.machine.apply = (entry) => {
      if (dec.decode(entry.data) === 'x') seenAtApply.push(durable.has('y'));
      return apply(entry);
    };
    (cell.disks.get('r1') as MemDisk).runSome(1_000);
    // x committed once durable here; it was applied before y (in the same ready's new entries) was durable.
    expect(seenAtApply).toEqual([false]);
    expect((x.outcome as Applied).result).toBe(1);
  });

  it('3: a ready that only moves the commit index writes nothing', () => {
    const { cell, deliver } = leaderWithOneFollower();
    cell.propose('r1', 'x');
    deliver('r2');
    (cell.disks.get('r2') as MemDisk).runPending();
    deliver('r1');
    (cell.disks.get('r1') as MemDisk).runPending();
    cell.inbox.splice(0);
    // r2 learns the commit from the next heartbeat: it applies 'x' with no disk operation at all.
    cell.get('r1').replica.tick();
    deliver('r2');
    expect((cell.disks.get('r2') as MemDisk).pendingCount).toBe(0);
    expect(cell.get('r2').machine.items).toEqual(['x']);
  });
});

describe('a follower answers before it applies', () => {
  it('sends its answer to an append before applying the committed entries that came with it', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    cell.propose('r1', 'a');
    cell.pump();
    const r2 = cell.get('r2');
    // The commit of 'a' reaches r2 with the next append (no ticks: no heartbeat carried it).
    expect(r2.machine.items).not.toContain('a');
    const applyAt: number[] = [];
    const apply = r2.machine.apply.bind(r2.machine);
    r2.machine.apply = (entry) => {
      applyAt.push(r2.sent.length);
      return apply(entry);
    };
    cell.propose('r1', 'b');
    const appends = cell.inbox.splice(0).filter((m) => m.to === 'r2' && m.type === MessageType.AppendEntries);
    expect(appends.length).toBeGreaterThan(0);
    const sentBefore = r2.sent.length;
    for (const m of appends) r2.replica.receive(m);
    // 'a' was durable here before this ready, but r2 is a follower: nothing applied, nothing sent before the fsync of 'b'.
    expect(r2.machine.items).not.toContain('a');
    expect(r2.sent.length).toBe(sentBefore);
    (cell.disks.get('r2') as MemDisk).runPending();
    expect(r2.machine.items).toEqual(['a']);
    const answer = r2.sent.findIndex((m, i) => i >= sentBefore && m.type === MessageType.AppendEntriesResponse);
    expect(answer).toBeGreaterThanOrEqual(sentBefore);
    // When 'a' was applied, the answer had already been handed to the transport.
    expect(applyAt[0]).toBeGreaterThan(answer);
  });
});

describe('proposals', () => {
  it('resolve with the state machine result, index and term', async () => {
    const cell = new Cell(3);
    const leader = cell.elect('r2');
    const p = proposeAsync(leader.replica, enc.encode('x'));
    cell.pump();
    const applied = await p;
    expect(applied.result).toBe(1);
    expect(applied.term).toBe(leader.replica.status().term);
    expect(leader.store.term(applied.index)).toBe(applied.term);
  });

  it('on a follower fail with NOT_LEADER naming the leader', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    const box = cell.propose('r3', 'x');
    cell.pump();
    expect(box.outcome).toBeInstanceOf(FencerError);
    expect((box.outcome as FencerError).code).toBe(ErrorCode.NOT_LEADER);
    expect((box.outcome as FencerError).leaderHint).toBe('r1');
  });

  it('fail with OUTCOME_UNKNOWN when leadership is lost before they apply', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    cell.isolated.add('r1');
    const box = cell.propose('r1', 'lost?');
    cell.pump();
    expect(box.outcome).toBeNull();
    // Cut off, r1 steps down (check-quorum) and the others elect one of them.
    cell.tick(40);
    expect(cell.get('r1').replica.isLeader).toBe(false);
    expect(cell.get('r2').replica.isLeader || cell.get('r3').replica.isLeader).toBe(true);
    cell.propose(cell.get('r2').replica.isLeader ? 'r2' : 'r3', 'next');
    cell.isolated.delete('r1');
    cell.tick(3);
    expect((box.outcome as FencerError).code).toBe(ErrorCode.OUTCOME_UNKNOWN);
    // r2's log overwrote the entry: nobody applied it.
    for (const id of cell.ids) expect(cell.get(id).machine.items).not.toContain('lost?');
  });

  it('fail with OUTCOME_UNKNOWN when the replica stops', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    cell.isolated.add('r1');
    const box = cell.propose('r1', 'x');
    cell.pump();
    cell.get('r1').replica.stop();
    expect((box.outcome as FencerError).code).toBe(ErrorCode.OUTCOME_UNKNOWN);
  });

  it('are bounded: one past pendingProposalsMax gets TOO_MANY_REQUESTS', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    cell.isolated.add('r1'); // Nothing commits, so everything stays pending.
    const boxes = Array.from({ length: pendingProposalsMax + 1 }, (_, i) => cell.propose('r1', `p${i}`));
    cell.pump();
    const refused = boxes.filter((b) => b.outcome instanceof FencerError && b.outcome.code === ErrorCode.TOO_MANY_REQUESTS);
    expect(refused).toHaveLength(1);
    expect(cell.get('r1').replica.pendingProposals).toBe(pendingProposalsMax);
  });

  it("refuse an empty command (the blank entry is the leader's own)", () => {
    const cell = new Cell(1);
    cell.elect('r1');
    const box = { outcome: null as unknown };
    cell.get('r1').replica.propose(new Uint8Array(0), (o) => (box.outcome = o.ok ? o.value : o.error.code));
    cell.pump();
    expect(box.outcome).toBe(ErrorCode.INVALID_ARGUMENT);
  });
});

describe('ReadIndex', () => {
  it('resolves once applied has reached the read index, which covers earlier writes', async () => {
    const cell = new Cell(3);
    const leader = cell.elect('r1');
    cell.propose('r1', 'w1');
    cell.propose('r1', 'w2');
    const read = readIndexAsync(leader.replica);
    cell.pump();
    const index: LogIndex = await read;
    expect(leader.replica.applied).toBeGreaterThanOrEqual(index);
    expect(leader.machine.items).toEqual(['w1', 'w2']);
  });

  it('refuses on a follower with NOT_LEADER', async () => {
    const cell = new Cell(3);
    cell.elect('r1');
    const read = readIndexAsync(cell.get('r2').replica);
    cell.pump();
    await expect(read).rejects.toMatchObject({ code: ErrorCode.NOT_LEADER });
  });

  it('times out when leadership cannot be confirmed', () => {
    const cell = new Cell(3, { readTimeoutTicks: 3, raft: { checkQuorum: false } });
    cell.elect('r1');
    cell.isolated.add('r1');
    let code: string | null = null;
    cell.get('r1').replica.readIndex((o) => (code = o.ok ? 'ok' : o.error.code));
    cell.tick(4);
    expect(code).toBe(ErrorCode.DEADLINE_EXCEEDED);
  });
});

describe('snapshots and restart', () => {
  it('takes a snapshot every N applied entries and compacts the log below it', () => {
    const cell = new Cell(3, { snapshotEveryEntries: 5 });
    cell.elect('r1');
    for (let i = 0; i < 12; i++) cell.propose('r1', `e${i}`);
    cell.pump();
    cell.tick(2);
    const store = cell.get('r1').store;
    const snap = store.snapshot();
    expect(snap.meta.index).toBeGreaterThanOrEqual(10);
    expect(store.firstIndex()).toBe(snap.meta.index + 1);
    expect(snap.meta.conf.voters).toEqual(['r1', 'r2', 'r3']);
    const restored = new ListMachine();
    restored.restore(snap.data);
    expect(restored.items.length).toBeGreaterThanOrEqual(5);
  });

  it('recovers on restart: snapshot restored, committed entries above it replayed, commit kept', () => {
    const cell = new Cell(3, { snapshotEveryEntries: 4 });
    cell.elect('r1');
    for (let i = 0; i < 10; i++) cell.propose('r1', `e${i}`);
    cell.pump();
    cell.tick(2);
    const before = cell.get('r3');
    const items = [...before.machine.items];
    const commit = before.replica.status().commit;
    before.replica.close(() => {});
    cell.pump();
    const after = cell.start(NodeId('r3'));
    cell.pump();
    expect(after.machine.items).toEqual(items);
    expect(after.replica.status().commit).toBeGreaterThanOrEqual(commit);
    expect(after.store.snapshot().meta.index).toBeGreaterThan(0);
  });

  it('a follower far behind a compacted log catches up through a snapshot', () => {
    const cell = new Cell(3, { snapshotEveryEntries: 3 });
    cell.elect('r1');
    cell.isolated.add('r3');
    for (let i = 0; i < 9; i++) cell.propose('r1', `e${i}`);
    cell.pump();
    cell.tick(2);
    expect(cell.get('r1').store.firstIndex()).toBeGreaterThan(2);
    cell.isolated.delete('r3');
    cell.tick(5);
    expect(cell.get('r3').machine.items).toEqual(cell.get('r1').machine.items);
  });
});

describe('opening: construct, then open()', () => {
  it('opens in two steps: construction calls nothing back; open() restores the snapshot, then replays the entries above it', () => {
    const cell = new Cell(3, { snapshotEveryEntries: 4 });
    cell.elect('r1');
    for (let i = 0; i < 10; i++) cell.propose('r1', `e${i}`);
    cell.pump();
    cell.tick(2);
    // One more entry, so that the restarted follower has entries above its snapshot to apply.
    cell.propose('r1', 'last');
    cell.pump();
    cell.tick(2);
    const before = cell.get('r3');
    const items = [...before.machine.items];
    expect(before.store.lastIndex()).toBeGreaterThan(before.store.snapshot().meta.index);
    before.replica.close(() => {});
    cell.pump();
    const after = cell.start(NodeId('r3'), { open: false });
    const snapshotIndex = after.store.snapshot().meta.index;
    expect(snapshotIndex).toBeGreaterThan(0);
    expect(after.machine.calls).toEqual([]);
    expect(after.sent).toEqual([]);
    expect(after.replica.applied).toBe(snapshotIndex);
    after.replica.open();
    expect(after.machine.calls[0]).toBe('restore');
    // The entries above the snapshot apply once the replica knows they are committed (from its hard state, or from the leader).
    cell.pump();
    cell.tick(2);
    const replayed = after.machine.calls.slice(1) as number[];
    expect(replayed[0]).toBe(snapshotIndex + 1);
    expect(replayed).toEqual(replayed.map((_, i) => snapshotIndex + 1 + i));
    expect(after.machine.items).toEqual(items);
  });

  it('refuses to be driven before it opens, and to open twice (assertions)', () => {
    const cell = new Cell(1);
    cell.get('r1').replica.close(() => {});
    cell.pump();
    const fresh = cell.start(NodeId('r1'), { open: false });
    expect(() => fresh.replica.tick()).toThrow(AssertionError);
    fresh.replica.open();
    expect(() => fresh.replica.open()).toThrow(AssertionError);
    expect(() => fresh.replica.tick()).not.toThrow();
  });
});

describe('storage failures', () => {
  it('an fsync error stops the replica and reports it; nothing is retried', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    (cell.disks.get('r1') as MemDisk).failNext('sync');
    const box = cell.propose('r1', 'x');
    cell.pump();
    expect(cell.fatal).not.toBeNull();
    expect(cell.get('r1').replica.stopped).toBe(true);
    expect((box.outcome as FencerError).code).toBe(ErrorCode.OUTCOME_UNKNOWN);
  });
});

describe('configuration', () => {
  it("the core runs with raft's defaults (raftTuningDefault), unless the replica config overrides one", () => {
    expect(new Cell(1).get('r1').replica.raftTuning).toEqual(raftTuningDefault);
    const tuned = new Cell(1, { raft: { maxInflightMsgs: 8, broadcastCommit: true } }).get('r1').replica.raftTuning;
    expect(tuned).toEqual({ ...raftTuningDefault, maxInflightMsgs: 8, broadcastCommit: true });
  });

  it('a plain Replica refuses the ackBeforeFsync bug, naming the testing export that plants it', () => {
    const disk = new MemDisk();
    let store: RaftLogStore | undefined;
    openRaftLogStore(disk, '/raft', {}, (e, s) => {
      if (e) throw e;
      store = s;
    });
    disk.runPending();
    const env = { clock: new ManualClock(), random: new SeededRandom(1), transport: { send() {} } };
    expect(
      () =>
        new Replica(
          { id: NodeId('r1'), peers: [NodeId('r1')], bugs: { ackBeforeFsync: true } },
          store as RaftLogStore,
          new ListMachine(),
          env,
        ),
    ).toThrow(/testing export/);
    expect(
      () =>
        new Replica(
          { id: NodeId('r1'), peers: [NodeId('r1')], bugs: { ackBeforeFsync: true } },
          store as RaftLogStore,
          new ListMachine(),
          env,
        ),
    ).toThrow(AssertionError);
  });
});

describe('messages from the network', () => {
  it('a message for another replica is dropped and counted by reason, and the cell keeps working', () => {
    const cell = new Cell(3);
    cell.elect('r1');
    const r2 = cell.get('r2').replica;
    const term = r2.status().term;
    const forged: Message = { type: MessageType.AppendEntries, from: NodeId('r1'), to: NodeId('r9'), term: Term(term + 1) };
    expect(r2.receive(forged)).toBe(DropReason.WrongTo);
    expect(r2.receive({ ...forged, to: NodeId('r2'), from: NodeId('r2') })).toBe(DropReason.FromSelf);
    expect(r2.receive(null as unknown as Message)).toBe(DropReason.Malformed);
    expect([...r2.droppedMessages]).toEqual([
      [DropReason.WrongTo, 1],
      [DropReason.FromSelf, 1],
      [DropReason.Malformed, 1],
    ]);
    expect(cell.labelled.map((c) => [c.id, c.name, c.labels['reason']])).toEqual([
      ['r2', 'replica_messages_dropped_total', 'wrong-to'],
      ['r2', 'replica_messages_dropped_total', 'from-self'],
      ['r2', 'replica_messages_dropped_total', 'malformed'],
    ]);
    expect(r2.status().term).toBe(term);
    const box = cell.propose('r1', 'after');
    cell.pump();
    cell.tick(2);
    expect((box.outcome as Applied).result).toBe(1);
    expect(cell.get('r2').machine.items).toEqual(['after']);
  });
});

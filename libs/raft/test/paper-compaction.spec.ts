/**
 * Goal: log compaction (Raft paper §7): the leader sends a snapshot, in
 * chunks, to a follower that needs entries it has discarded; the follower
 * assembles it, installs it (or keeps its log when the snapshot is a
 * prefix of it), and everything survives crashes.
 * Method: hand-driven leader and follower for the InstallSnapshot protocol
 * (Figure 13's receiver rules); the course's snapshot tests (basic,
 * install, install unreliable, install crash, after crash) on the seeded
 * network, whose nodes snapshot and compact every few entries.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { ConfChangeType, EntryType, MessageType, encodeConfChange, type Message } from '../src/index.js';
import { drain, electLeader, msg, newNode, ofType, pump, storageWith, N, type Handle } from './helpers.js';
import { Network } from './network.js';

const three = ['1', '2', '3'];

/** A leader whose log 1..10 (term 1) is compacted up to 8 into a snapshot carrying `data`. */
function compactedLeader(data: Uint8Array, snapshotChunkBytes = 300): Handle {
  const storage = storageWith({ voters: three, logTerms: Array<number>(10).fill(1), term: 1, commit: 10 });
  storage.createSnapshot(LogIndex(8), { voters: three.map(N), learners: [] }, data);
  storage.compact(LogIndex(8));
  const h = newNode({ id: '1', voters: three, storage, snapshotChunkBytes });
  electLeader(h, three);
  return h;
}

function pattern(n: number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (i * 7 + 3) % 251);
}

describe('§7 Log compaction', () => {
  it('"the leader must occasionally send snapshots to followers that lag behind" — when the entries it needs are discarded', () => {
    const h = compactedLeader(pattern(100));
    // The follower's log is empty: it refuses the first append, hinting index 0.
    h.node.step(
      msg(MessageType.AppendEntriesResponse, '2', '1', 2, {
        index: LogIndex(10),
        reject: true,
        rejectHint: LogIndex(0),
        rejectTerm: Term(0),
      }),
    );
    const snaps = ofType(drain(h).messages, MessageType.InstallSnapshot);
    expect(snaps).toHaveLength(1);
    expect(snaps[0]).toMatchObject({ to: '2', snapshotOffset: 0, snapshotDone: true, snapshotTotalBytes: 100 });
    expect(snaps[0]?.snapshotMeta).toMatchObject({ index: 8, term: 1 });
    expect(h.node.status().progress?.['2']?.state).toBe('snapshot');
  });

  it('"Create new snapshot file if first chunk (offset is 0) ... Write data into snapshot file at given offset ... Reply and wait for more data chunks if done is false" (Figure 13)', () => {
    const data = pattern(1000);
    const nodes = new Map<string, Handle>([
      ['1', compactedLeader(data)],
      ['2', newNode({ id: '2', voters: three, term: 1 })],
      ['3', newNode({ id: '3', voters: three, logTerms: Array<number>(10).fill(1), term: 1 })],
    ]);
    // A heartbeat round shows the leader where the followers are.
    (nodes.get('1') as Handle).node.tick();
    const delivered = pump(nodes);
    const chunks = delivered.filter((m) => m.type === MessageType.InstallSnapshot);
    expect(chunks.map((m) => [m.snapshotOffset, m.snapshotChunk?.byteLength, m.snapshotDone])).toEqual([
      [0, 300, false],
      [300, 300, false],
      [600, 300, false],
      [900, 100, true],
    ]);
    const follower = nodes.get('2') as Handle;
    expect(follower.storage.snapshot().meta.index).toBe(8);
    expect(follower.storage.snapshot().data).toEqual(data);
    // Then it is caught up from the snapshot on, with ordinary appends.
    expect(follower.storage.lastIndex()).toBe(11);
    expect(follower.node.status().commit).toBe(11);
  });

  it('"If the follower receives a snapshot that describes a prefix of its log ... entries following the snapshot are still valid and must be retained."', () => {
    const h = newNode({ id: '2', voters: three, logTerms: [1, 1, 1, 1, 1], term: 1 });
    h.node.step(
      msg(MessageType.InstallSnapshot, '1', '2', 1, {
        snapshotMeta: { index: LogIndex(3), term: Term(1), conf: { voters: three.map(N), learners: [] } },
        snapshotChunk: new Uint8Array(0),
        snapshotOffset: 0,
        snapshotTotalBytes: 0,
        snapshotDone: true,
      }),
    );
    const out = drain(h);
    expect(h.storage.snapshot().meta.index).toBe(0);
    expect(h.storage.lastIndex()).toBe(5);
    expect(h.node.status().commit).toBe(3);
    expect(ofType(out.messages, MessageType.InstallSnapshotResponse)[0]).toMatchObject({ snapshotDone: true, index: 3 });
  });

  it('"Usually the snapshot will contain new information not already in the recipient\'s log. In this case, the follower discards its entire log; it is all superseded by the snapshot"', () => {
    const h = newNode({ id: '2', voters: three, logTerms: [1, 2, 2], term: 3 });
    const conf = { voters: ['1', '2', '3', '4'].map(N), learners: [N('5')] };
    h.node.step(
      msg(MessageType.InstallSnapshot, '1', '2', 3, {
        snapshotMeta: { index: LogIndex(7), term: Term(3), conf },
        snapshotChunk: Uint8Array.of(1, 2, 3),
        snapshotOffset: 0,
        snapshotTotalBytes: 3,
        snapshotDone: true,
      }),
    );
    const out = drain(h);
    expect(h.storage.firstIndex()).toBe(8);
    expect(h.storage.lastIndex()).toBe(7);
    expect(h.storage.snapshot().data).toEqual(Uint8Array.of(1, 2, 3));
    // The snapshot's configuration is now in force.
    expect([h.node.status().voters, h.node.status().learners]).toEqual([conf.voters, conf.learners]);
    expect(h.node.status()).toMatchObject({ commit: 7, applied: 7 });
    expect(ofType(out.messages, MessageType.InstallSnapshotResponse)[0]).toMatchObject({ snapshotDone: true, index: 7 });
  });

  it('"If instead the follower receives a snapshot that describes a prefix of its log" older than what it committed, it is ignored', () => {
    const h = newNode({ id: '2', voters: three, logTerms: [1, 1, 1, 1, 1], term: 1, commit: 5 });
    h.node.step(
      msg(MessageType.InstallSnapshot, '1', '2', 1, {
        snapshotMeta: { index: LogIndex(2), term: Term(1), conf: { voters: three.map(N), learners: [] } },
        snapshotChunk: new Uint8Array(0),
        snapshotOffset: 0,
        snapshotTotalBytes: 0,
        snapshotDone: true,
      }),
    );
    const out = drain(h);
    expect(h.storage.snapshot().meta.index).toBe(0);
    expect(ofType(out.messages, MessageType.InstallSnapshotResponse)[0]).toMatchObject({ index: 5 });
  });

  it("a snapshot that arrives while a Ready is being persisted leaves that Ready's committed entries (and their membership) intact", () => {
    const h = newNode({ id: '2', voters: three, term: 1 });
    const learner = {
      index: LogIndex(1),
      term: Term(1),
      type: EntryType.ConfChange,
      data: encodeConfChange({ type: ConfChangeType.AddLearner, node: N('4') }),
    };
    const normal = { index: LogIndex(2), term: Term(1), type: EntryType.Normal, data: Uint8Array.of(7) };
    h.node.step(
      msg(MessageType.AppendEntries, '1', '2', 1, {
        index: LogIndex(0),
        logTerm: Term(0),
        entries: [learner, normal],
        commit: LogIndex(2),
      }),
    );
    const rd = h.node.ready();
    expect(rd.committedEntries.map((e) => e.index)).toEqual([1, 2]);
    // While that Ready's fsync runs, the leader's snapshot completes.
    const conf = { voters: ['1', '2', '3'].map(N), learners: [] };
    h.node.step(
      msg(MessageType.InstallSnapshot, '1', '2', 1, {
        snapshotMeta: { index: LogIndex(9), term: Term(1), conf },
        snapshotChunk: Uint8Array.of(1),
        snapshotOffset: 0,
        snapshotTotalBytes: 1,
        snapshotDone: true,
      }),
    );
    expect(h.node.confStateAt(LogIndex(1)).learners).toEqual(['4']);
    h.storage.append(rd.entries);
    if (rd.hardState !== undefined) h.storage.setHardState(rd.hardState);
    h.node.advance();
    const next = h.node.ready();
    expect(next.snapshot?.meta.index).toBe(9);
    expect(next.committedEntries).toEqual([]);
    h.storage.applySnapshot(next.snapshot as NonNullable<typeof next.snapshot>);
    h.node.advance();
    expect(h.node.status()).toMatchObject({ commit: 9, applied: 9, learners: [] });
    expect(h.node.confStateAt(LogIndex(9))).toEqual(conf);
  });

  it('a lost chunk is sent again after an election timeout without an answer', () => {
    const h = compactedLeader(pattern(1000));
    h.node.step(
      msg(MessageType.AppendEntriesResponse, '2', '1', 2, {
        index: LogIndex(10),
        reject: true,
        rejectHint: LogIndex(0),
        rejectTerm: Term(0),
      }),
    );
    expect(ofType(drain(h).messages, MessageType.InstallSnapshot)).toHaveLength(1);
    const resent: Message[] = [];
    for (let i = 0; i < 10; i++) {
      h.node.tick();
      resent.push(...ofType(drain(h).messages, MessageType.InstallSnapshot));
    }
    expect(resent.map((m) => m.snapshotOffset)).toEqual([0]);
  });

  it('a follower handed a chunk of a transfer it does not hold asks for the start; a chunk past what it has asks for the gap', () => {
    const meta = { index: LogIndex(9), term: Term(1), conf: { voters: three.map(N), learners: [] } };
    const chunk = (offset: number): Message =>
      msg(MessageType.InstallSnapshot, '1', '2', 1, {
        snapshotMeta: meta,
        snapshotChunk: new Uint8Array(10),
        snapshotOffset: offset,
        snapshotTotalBytes: 30,
        snapshotDone: offset === 20,
      });
    const h = newNode({ id: '2', voters: three, term: 1 });
    h.node.step(chunk(10));
    expect(ofType(drain(h).messages, MessageType.InstallSnapshotResponse)[0]?.snapshotOffset).toBe(0);
    h.node.step(chunk(0));
    expect(ofType(drain(h).messages, MessageType.InstallSnapshotResponse)[0]?.snapshotOffset).toBe(10);
    h.node.step(chunk(20));
    expect(ofType(drain(h).messages, MessageType.InstallSnapshotResponse)[0]?.snapshotOffset).toBe(10);
    expect(h.storage.snapshot().meta.index).toBe(0);
  });

  it('Snapshot basic (course): servers snapshot and discard their logs, and keep agreeing', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 91, snapshotEvery: 10 });
    for (let i = 0; i < 60; i++) net.one(`s${i}`, 3);
    for (const n of net.nodes.values()) {
      expect(n.storage.firstIndex()).toBeGreaterThan(40);
      expect(n.machine.commands).toHaveLength(60);
    }
  });

  it('Snapshot install (course): a follower that was away while the others compacted catches up through InstallSnapshot', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 92, snapshotEvery: 10, config: { snapshotChunkBytes: 64 } });
    net.one('first', 3);
    const leader = net.waitLeader().id;
    const away = ['a', 'b', 'c'].find((id) => id !== leader) as string;
    net.isolate(away);
    for (let i = 0; i < 40; i++) net.one(`i${i}`, 2);
    net.recordSent = true;
    net.heal();
    net.one('last', 3);
    const chunks = net.sent.filter((m) => m.type === MessageType.InstallSnapshot && m.to === away);
    expect(chunks.length).toBeGreaterThan(1);
    expect(net.get(away).machine.commands).toEqual(net.get(leader).machine.commands);
  });

  it('Snapshot install unreliable (course): the same over a lossy, slow, duplicating network', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 93, snapshotEvery: 10, config: { snapshotChunkBytes: 64 } });
    net.one('first', 3);
    for (let round = 0; round < 4; round++) {
      const leader = net.waitLeader().id;
      const away = net.rnd.pick(['a', 'b', 'c'].filter((id) => id !== leader));
      net.isolate(away);
      for (let i = 0; i < 15; i++) net.one(`r${round}-${i}`, 2);
      net.heal();
      net.dropRate = 0.15;
      net.delayTicksMax = 3;
      net.duplicateRate = 0.1;
      net.tick(60);
      net.dropRate = 0;
      net.delayTicksMax = 0;
      net.duplicateRate = 0;
    }
    net.one('last', 3);
    const all = net.get('a').machine.commands;
    for (const n of net.nodes.values()) expect(n.machine.commands).toEqual(all);
    expect(all).toHaveLength(62);
  });

  it('Snapshot install crash (course): a follower that crashed while the others compacted catches up after restart', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 94, snapshotEvery: 10 });
    for (let round = 0; round < 3; round++) {
      const leader = net.waitLeader().id;
      const victim = net.rnd.pick(['a', 'b', 'c'].filter((id) => id !== leader));
      net.crash(victim);
      for (let i = 0; i < 25; i++) net.one(`c${round}-${i}`, 2);
      net.restart(victim);
      net.one(`back${round}`, 3);
      expect(net.get(victim).machine.commands).toEqual(net.get(leader).machine.commands);
    }
  });

  it('Snapshot after crash (course): every server restarts from its snapshot plus log and the cluster carries on', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 95, snapshotEvery: 7 });
    for (let i = 0; i < 30; i++) net.one(`p${i}`, 3);
    for (const id of ['a', 'b', 'c']) net.crash(id);
    for (const id of ['a', 'b', 'c']) {
      net.restart(id);
      // The state machine restarts from the stored snapshot; the log above it is replayed as committed entries.
      expect(net.get(id).storage.snapshot().meta.index).toBeGreaterThan(20);
    }
    net.one('after', 3);
    for (const n of net.nodes.values()) {
      expect(n.machine.commands).toEqual([...Array.from({ length: 30 }, (_, i) => `p${i}`), 'after']);
    }
  });

  it('after compaction past membership changes, a restarted node takes its configuration from the snapshot (and later ConfChange entries)', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 96, snapshotEvery: 5 });
    net.addNode('d', undefined);
    net.changeConf({ type: ConfChangeType.AddLearner, node: NodeId('d') });
    for (let i = 0; i < 12; i++) net.one(`k${i}`, 4);
    net.changeConf({ type: ConfChangeType.AddVoter, node: NodeId('d') });
    for (const id of ['a', 'b', 'c', 'd']) {
      expect(net.get(id).storage.snapshot().meta.conf.learners).toEqual(['d']);
      net.crash(id);
      net.restart(id);
      expect(net.get(id).node.status().voters).toEqual(['a', 'b', 'c', 'd']);
    }
    net.one('end', 4);
  });
});

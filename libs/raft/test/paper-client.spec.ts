/**
 * Goal: client interaction (Raft paper §8) and linearizable reads through
 * ReadIndex (dissertation §6.4) behave as specified: the blank entry at
 * the start of a term, requests only at the leader, reads that note the
 * commit index, confirm leadership with one heartbeat round, and wait for
 * the blank entry.
 * Method: hand-driven leaders, where each heartbeat answer is fed in by the
 * test; the seeded network for reads against a partitioned leader and for
 * read-after-write.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, Term } from '@fencer/base';
import { MessageType } from '../src/index.js';
import { uncommittedEntriesMax } from '../src/limits.js';
import { ackAppend, drain, electLeader, msg, newNode, ofType, type Handle } from './helpers.js';
import { bytes, Network } from './network.js';

const three = ['1', '2', '3'];
const five = ['1', '2', '3', '4', '5'];

function steadyLeader(voters: readonly string[]): Handle {
  const h = newNode({ id: '1', voters, term: 1 });
  electLeader(h, voters);
  for (const v of voters.slice(1)) ackAppend(h, v, 1);
  drain(h);
  return h;
}

function heartbeatAck(h: Handle, from: string, context: string | undefined): void {
  h.node.step(msg(MessageType.HeartbeatResponse, from, '1', h.node.status().term, context !== undefined ? { context } : {}));
}

describe('§8 Client interaction', () => {
  it('"Raft handles this by having each leader commit a blank no-op entry into the log at the start of its term."', () => {
    const h = newNode({ id: '1', voters: three, logTerms: [1, 1], term: 1 });
    const out = electLeader(h, three);
    expect(out.entries.map((e) => [e.index, e.term, e.data.byteLength])).toEqual([[3, 2, 0]]);
  });

  it('"a leader must have the latest information on which entries are committed": it learns it by committing its blank entry', () => {
    const h = newNode({ id: '1', voters: three, logTerms: [1, 1, 1], term: 1, commit: 1 });
    electLeader(h, three);
    expect(h.node.status().commit).toBe(1);
    ackAppend(h, '2', 4);
    const out = drain(h);
    expect(h.node.status().commit).toBe(4);
    expect(out.committed.map((e) => e.index)).toEqual([2, 3, 4]);
  });

  it('"Clients of Raft send all of their requests to the leader": followers and candidates refuse proposals', () => {
    const h = newNode({ id: '1', voters: three, term: 1 });
    expect(h.node.propose(bytes('x'))).toBeNull();
    h.node.campaign();
    expect(h.node.propose(bytes('x'))).toBeNull();
    expect(h.node.readIndex('r')).toBe(false);
  });

  it('a leader cut off from its followers stops taking proposals once its uncommitted tail reaches the limit', () => {
    const h = steadyLeader(three);
    let accepted = 0;
    while (h.node.propose(bytes('p')) !== null) {
      accepted++;
      expect(accepted).toBeLessThanOrEqual(uncommittedEntriesMax);
    }
    expect(accepted).toBe(uncommittedEntriesMax);
    drain(h);
    // Once the followers catch up and the tail commits, it takes proposals again.
    ackAppend(h, '2', h.node.status().lastIndex);
    drain(h);
    expect(h.node.propose(bytes('q'))).not.toBeNull();
  });
});

describe('Dissertation: ReadIndex', () => {
  it('"If the leader has not yet marked an entry from its current term committed, it waits until it has done so" — reads wait for the blank entry', () => {
    const h = newNode({ id: '1', voters: three, logTerms: [1], term: 1, commit: 1 });
    electLeader(h, three);
    expect(h.node.readIndex('early')).toBe(true);
    const before = drain(h);
    expect(before.readStates).toEqual([]);
    expect(ofType(before.messages, MessageType.Heartbeat).filter((m) => m.context !== undefined)).toEqual([]);
    ackAppend(h, '2', 2);
    const beats = ofType(drain(h).messages, MessageType.Heartbeat).filter((m) => m.context !== undefined);
    expect(beats.map((m) => m.to).sort()).toEqual(['2', '3']);
    heartbeatAck(h, '2', beats[0]?.context);
    expect(drain(h).readStates).toEqual([{ index: 2, requestCtx: 'early' }]);
  });

  it('"the leader saves its current commit index in a local variable readIndex" — later commits do not change it', () => {
    const h = steadyLeader(three);
    h.node.readIndex('r');
    const [beat] = ofType(drain(h).messages, MessageType.Heartbeat);
    h.node.propose(bytes('w'));
    drain(h);
    ackAppend(h, '2', 2);
    drain(h);
    expect(h.node.status().commit).toBe(2);
    heartbeatAck(h, '2', beat?.context);
    expect(drain(h).readStates).toEqual([{ index: 1, requestCtx: 'r' }]);
  });

  it('"the leader ... issues a new round of heartbeats and waits for their acknowledgments from a majority of the cluster"', () => {
    const h = steadyLeader(five);
    h.node.readIndex('r');
    const [beat] = ofType(drain(h).messages, MessageType.Heartbeat);
    heartbeatAck(h, '2', beat?.context);
    expect(drain(h).readStates).toEqual([]);
    // A heartbeat answer without the round's context does not confirm the read.
    heartbeatAck(h, '3', undefined);
    expect(drain(h).readStates).toEqual([]);
    heartbeatAck(h, '4', beat?.context);
    expect(drain(h).readStates).toEqual([{ index: 1, requestCtx: 'r' }]);
  });

  it("reads that arrive before the round goes out share one heartbeat round; a later round's confirmation releases earlier ones", () => {
    const h = steadyLeader(three);
    h.node.readIndex('a');
    h.node.readIndex('b');
    const round1 = ofType(drain(h).messages, MessageType.Heartbeat);
    expect(round1).toHaveLength(2);
    h.node.readIndex('c');
    const round2 = ofType(drain(h).messages, MessageType.Heartbeat);
    expect(round2[0]?.context).not.toBe(round1[0]?.context);
    heartbeatAck(h, '3', round2[0]?.context);
    expect(drain(h).readStates.map((r) => r.requestCtx)).toEqual(['a', 'b', 'c']);
  });

  it('"Read-only operations can be handled without writing anything into the log"', () => {
    const h = steadyLeader(three);
    const last = h.node.status().lastIndex;
    for (let i = 0; i < 5; i++) h.node.readIndex(`r${i}`);
    const out = drain(h);
    expect(out.entries).toEqual([]);
    expect(h.node.status().lastIndex).toBe(last);
  });

  it('a single-server cluster answers a read at once (it is its own majority)', () => {
    const h = newNode({ id: '1', voters: ['1'], term: 1 });
    electLeader(h, ['1']);
    expect(h.node.readIndex('solo')).toBe(true);
    const out = drain(h);
    expect(out.readStates).toEqual([{ index: 1, requestCtx: 'solo' }]);
    expect(out.messages).toEqual([]);
  });

  it('a deposed leader cut off from the majority never confirms a read', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 101 });
    net.one('x', 3);
    const old = net.waitLeader();
    net.isolate(old.id);
    expect(old.node.readIndex('stale?')).toBe(true);
    net.tick(40);
    expect(old.readStates).toEqual([]);
    // Meanwhile the majority side commits a write that a read there must see.
    const w = net.one('y', 2);
    const fresh = net.waitLeader();
    fresh.node.readIndex('fresh');
    net.tick(2);
    expect(fresh.readStates).toHaveLength(1);
    expect(fresh.readStates[0]?.index).toBeGreaterThanOrEqual(w);
  });

  it('a read reflects every write applied before it began (read-after-write across a leader change)', () => {
    const net = new Network({ ids: ['a', 'b', 'c', 'd', 'e'], seed: 102 });
    for (let i = 0; i < 5; i++) {
      const w = net.one(`w${i}`, 3);
      const l = net.waitLeader();
      l.readStates = [];
      expect(l.node.readIndex(`r${i}`)).toBe(true);
      net.tick(2);
      expect(l.readStates.map((r) => r.requestCtx)).toEqual([`r${i}`]);
      expect(l.readStates[0]?.index).toBeGreaterThanOrEqual(w);
      net.isolate(l.id);
      net.tick(30);
      net.heal();
    }
  });

  it('a follower refuses a read (it cannot vouch for the commit index): the caller forwards it to the leader', () => {
    const h = newNode({ id: '2', voters: three, term: 1 });
    h.node.step(msg(MessageType.Heartbeat, '1', '2', 1, { commit: LogIndex(0) }));
    expect(h.node.readIndex('r')).toBe(false);
    expect(Term(1)).toBe(1);
  });
});

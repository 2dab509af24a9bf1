/**
 * Goal: the simulator's parts do what the checkers rely on, and every checker
 * can fire: fed a history that breaks its property, it reports; fed a good
 * one, it stays quiet.
 * Method: direct unit checks of the scheduler, network, KV state machine and
 * hash, and synthetic observation sequences for each checker.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, SeededRandom, Term } from '@fencer/base';
import { type Entry, type HardState, type Message, EntryType, MemoryStorage, MessageType } from '@fencer/raft';
import { Checkers } from './checkers.js';
import { Hasher, digest } from './hash.js';
import { KvStateMachine, decodePut, encodePut } from './kv.js';
import { Network, quietNetwork } from './network.js';
import { cutBetween, makePartition, PARTITION_SHAPES } from './partitions.js';
import { Scheduler } from './scheduler.js';

const n1 = NodeId('n1');
const n2 = NodeId('n2');
const n3 = NodeId('n3');

function entry(index: number, term: number, text: string): Entry {
  return { index: LogIndex(index), term: Term(term), type: EntryType.Normal, data: new TextEncoder().encode(text) };
}

function hs(term: number, commit: number): HardState {
  return { term: Term(term), vote: null, commit: LogIndex(commit) };
}

/** A log (MemoryStorage) holding `entries` from index 1. */
function logOf(...entries: Entry[]): MemoryStorage {
  const s = new MemoryStorage();
  s.append(entries);
  return s;
}

describe('Scheduler', () => {
  it('runs events by time, then in the order they were scheduled', () => {
    const s = new Scheduler();
    const order: string[] = [];
    s.at(20, 0, () => order.push('b'));
    s.at(10, 0, () => order.push('a'));
    s.at(20, 0, () => order.push('c'));
    s.at(10, 0, () => s.after(10, 0, () => order.push('d')));
    s.runUntil(100);
    expect(order).toEqual(['a', 'b', 'c', 'd']);
    expect(s.now).toBe(100);
  });

  it('refuses an event in the past and stops early when asked', () => {
    const s = new Scheduler();
    s.at(5, 0, () => {});
    s.at(6, 0, () => {});
    expect(s.runUntil(10, () => true)).toBe(false);
    expect(s.now).toBe(5);
    expect(() => s.at(1, 0, () => {})).toThrow(/past/);
  });

  it('hashes what ran: the same schedule gives the same trace, another a different one', () => {
    const run = (delay: number): string => {
      const s = new Scheduler();
      s.at(1, 1, () => s.after(delay, 2, () => {}));
      s.runUntil(100);
      return s.trace.hex();
    };
    expect(run(5)).toBe(run(5));
    expect(run(5)).not.toBe(run(6));
  });
});

describe('Network', () => {
  const msg = (from: string, to: string): Message => ({ type: MessageType.Heartbeat, from: NodeId(from), to: NodeId(to), term: Term(1) });

  it('delivers, drops on cut links (also in flight), and heals', () => {
    const s = new Scheduler();
    const got: string[] = [];
    const net = new Network(
      s,
      new SeededRandom(1),
      (m) => got.push(`${m.from}>${m.to}`),
      () => 1,
    );
    net.profile = quietNetwork;
    net.send([msg('n1', 'n2')]);
    net.setCut([[n2, n1]]);
    net.send([msg('n2', 'n1')]);
    s.runUntil(1_000_000);
    expect(got).toEqual(['n1>n2']);
    net.send([msg('n1', 'n2')]);
    net.setCut([[n1, n2]]);
    s.runUntil(2_000_000);
    expect(got).toEqual(['n1>n2']);
    net.heal();
    net.send([msg('n2', 'n1')]);
    s.runUntil(3_000_000);
    expect(got).toEqual(['n1>n2', 'n2>n1']);
  });

  it('has a heavy tail: some delays are far above the median', () => {
    const net = new Network(
      new Scheduler(),
      new SeededRandom(2),
      () => {},
      () => 1,
    );
    const delays = Array.from({ length: 20_000 }, () => net.sampleDelayUs()).sort((a, b) => a - b);
    const median = delays[10_000] as number;
    expect(median).toBeGreaterThan(500);
    expect(median).toBeLessThan(2_000);
    expect(delays[19_990] as number).toBeGreaterThan(50 * median);
  });

  it('every partition shape cuts something and never a node from itself', () => {
    const nodes = [n1, n2, n3, NodeId('n4'), NodeId('n5')];
    for (const shape of PARTITION_SHAPES) {
      const p = makePartition(shape, nodes, n1, new SeededRandom(3));
      if (shape !== 'one-way-random') expect(p.links.length).toBeGreaterThan(0);
      for (const [a, b] of p.links) expect(a).not.toBe(b);
    }
    expect(cutBetween([n1], [n2, n3], true)).toEqual([
      [n1, n2],
      [n1, n3],
    ]);
  });
});

describe('KvStateMachine', () => {
  it('applies puts, snapshots and restores, and refuses unknown commands', () => {
    const kv = new KvStateMachine();
    expect(kv.apply({ ...entry(3, 1, ''), data: encodePut(2, 7) })).toEqual({ key: 2, previous: 0 });
    expect(kv.apply({ ...entry(4, 1, ''), data: encodePut(2, 9) })).toEqual({ key: 2, previous: 7 });
    const copy = new KvStateMachine();
    copy.restore(kv.snapshot());
    expect(copy.stateHash()).toBe(kv.stateHash());
    expect(copy.versions[2]).toBe(4);
    expect(decodePut(encodePut(5, 123))).toEqual({ key: 5, writeId: 123 });
    expect(() => kv.apply({ ...entry(5, 1, ''), data: Uint8Array.of(9, 9) })).toThrow(/unknown command/);
    expect(() => kv.apply({ ...entry(4, 1, ''), data: encodePut(1, 1) })).toThrow(/log order/);
  });
});

describe('Hasher', () => {
  it('tells different inputs apart and caches entry digests per payload', () => {
    expect(new Hasher().str('ab').hex()).not.toBe(new Hasher().str('ba').hex());
    expect(new Hasher().num(2 ** 40).hex()).not.toBe(new Hasher().num(0).hex());
    const data = Uint8Array.of(1, 2, 3);
    expect(digest(0, data)).toBe(digest(0, Uint8Array.of(1, 2, 3)));
    expect(digest(0, data)).not.toBe(digest(1, data));
  });
});

describe('Checkers fire on broken histories and only then', () => {
  const now = (): number => 0;

  it('election safety: two leaders in one term', () => {
    const c = new Checkers(now);
    c.becameLeader(n1, 2, logOf());
    c.leaderMessage(n1, 2);
    c.becameLeader(n2, 3, logOf());
    expect(c.violationCount).toBe(0);
    c.leaderMessage(n3, 3);
    expect(c.violations.map((v) => v.checker)).toEqual(['election-safety']);
  });

  it('log matching: same index and term, different entries; or different histories before them', () => {
    const c = new Checkers(now);
    c.saved(n1, undefined, [entry(1, 1, 'a'), entry(2, 1, 'b')], logOf(entry(1, 1, 'a'), entry(2, 1, 'b')));
    c.saved(n2, undefined, [entry(1, 1, 'a'), entry(2, 1, 'b')], logOf(entry(1, 1, 'a'), entry(2, 1, 'b')));
    expect(c.violationCount).toBe(0);
    c.saved(n3, undefined, [entry(1, 1, 'a'), entry(2, 1, 'X')], logOf(entry(1, 1, 'a'), entry(2, 1, 'X')));
    expect(c.violations.map((v) => v.checker)).toEqual(['log-matching']);
    const d = new Checkers(now);
    d.saved(n1, undefined, [entry(1, 1, 'a'), entry(2, 2, 'b')], logOf(entry(1, 1, 'a'), entry(2, 2, 'b')));
    d.saved(n2, undefined, [entry(1, 2, 'z'), entry(2, 2, 'b')], logOf(entry(1, 2, 'z'), entry(2, 2, 'b')));
    expect(d.violations.map((v) => v.checker)).toEqual(['log-matching']);
  });

  it('state machine safety: two replicas commit or apply different entries at one index', () => {
    const c = new Checkers(now);
    const log1 = logOf(entry(1, 1, 'a'));
    c.saved(n1, hs(1, 1), [entry(1, 1, 'a')], log1);
    c.appliedEntry(n2, 1, 1, digest(0, entry(1, 1, 'a').data));
    expect(c.violationCount).toBe(0);
    c.appliedEntry(n3, 1, 2, digest(0, entry(1, 2, 'b').data));
    expect(c.violations.map((v) => v.checker)).toEqual(['state-machine-safety']);
  });

  it('leader completeness: a leader of a later term lacks an entry committed before it', () => {
    const c = new Checkers(now);
    c.saved(n1, hs(2, 2), [entry(1, 1, 'a'), entry(2, 2, 'b')], logOf(entry(1, 1, 'a'), entry(2, 2, 'b')));
    c.becameLeader(n2, 2, logOf(entry(1, 1, 'a'))); // Same term: not held to it.
    expect(c.violationCount).toBe(0);
    c.becameLeader(n3, 3, logOf(entry(1, 1, 'a'), entry(2, 3, 'c')));
    expect(c.violations.map((v) => v.checker)).toEqual(['leader-completeness']);
  });

  it('commit monotonic: within a life, and across a restart against what was durable', () => {
    const c = new Checkers(now);
    const log = logOf(entry(1, 1, 'a'), entry(2, 1, 'b'));
    c.saved(n1, hs(1, 2), [], log);
    c.durable(n1, hs(1, 2));
    c.recovered(n1, hs(1, 2), 0);
    expect(c.violationCount).toBe(0);
    c.saved(n1, hs(1, 1), [], log);
    c.recovered(n1, hs(1, 1), 0);
    expect(c.violations.map((v) => v.checker)).toEqual(['commit-monotonic', 'commit-monotonic']);
  });

  it('acked writes: one acked at an index where something else committed, or missing at the end', () => {
    const c = new Checkers(now);
    const a = entry(1, 1, 'a');
    c.appliedEntry(n1, 1, 1, digest(0, a.data));
    c.ackedWrite({ writeId: 1, key: 0, index: 1, term: 1, digest: digest(0, a.data), ackUs: 0 });
    c.finalAcks([{ node: n1, log: logOf(a), applied: 1 }]);
    expect(c.violationCount).toBe(0);
    c.ackedWrite({ writeId: 2, key: 0, index: 1, term: 2, digest: 'other', ackUs: 0 });
    c.finalAcks([{ node: n2, log: logOf(a), applied: 0 }]);
    expect(new Set(c.violations.map((v) => v.checker))).toEqual(new Set(['acked-lost']));
  });

  it('stale read: a read begun after an acked write that does not see it', () => {
    const c = new Checkers(now);
    const a = entry(5, 1, 'a');
    c.appliedEntry(n1, 5, 1, digest(0, a.data));
    const before = c.readBarrier();
    c.ackedWrite({ writeId: 1, key: 3, index: 5, term: 1, digest: digest(0, a.data), ackUs: 0 });
    c.readServed(n2, before, 3, 4, 0); // Began before the ack: may miss it.
    const after = c.readBarrier();
    c.readServed(n1, after, 3, 5, 5);
    expect(c.violationCount).toBe(0);
    c.readServed(n2, after, 3, 4, 0);
    c.readServed(n2, after, 3, 9, 2);
    expect(c.violations.map((v) => v.checker)).toEqual(['stale-read', 'stale-read']);
  });
});

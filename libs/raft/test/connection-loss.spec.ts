/**
 * Goal: the input "connection to the leader lost" (RaftNode.reportConnectionLost,
 * docs/decisions/0021-crash-detection-by-the-transport.md) replaces a dead
 * leader without waiting out the election timer, and never deposes a live one.
 * Method: as the paper tests do, single-node cases feed the input and
 * messages by hand and read the Readies; cluster cases run the seeded
 * in-memory network, and deliver messages without a single tick where the
 * claim is "at once". The dissertation's rules this leans on: PreVote (§9.6)
 * changes no term, and CheckQuorum's lease (§4.2.3) makes followers that
 * still hear from a leader ignore vote requests.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { MessageType } from '../src/index.js';
import { drain, msg, newNode, ofType, N } from './helpers.js';
import { Network } from './network.js';

const three = ['1', '2', '3'];
const five = ['a', 'b', 'c', 'd', 'e'];
const fast = { preVote: true, checkQuorum: true } as const;

/** A follower of '2' at term 2 that has just heard from it. */
function followerOf2(extra: Partial<Parameters<typeof newNode>[0]> = {}): ReturnType<typeof newNode> {
  const h = newNode({ id: '1', voters: three, logTerms: [1, 2], term: 2, ...fast, ...extra });
  h.node.step(msg(MessageType.Heartbeat, '2', '1', 2, { commit: LogIndex(0) }));
  drain(h);
  return h;
}

/** Delivery rounds (Readies, then every message due) until `done`, with no tick; returns how many rounds it took. */
function roundsUntil(net: Network, done: () => boolean, roundsMax: number): number {
  for (let round = 1; round <= roundsMax; round++) {
    net.processReadies();
    net.deliver();
    if (done()) return round;
  }
  return Infinity;
}

function electedAndSettled(net: Network): { id: string; term: number } {
  const leader = net.waitLeader();
  net.tick(3);
  return { id: leader.id, term: leader.node.status().term };
}

describe('connection to the leader lost: one follower', () => {
  it("a follower that loses its leader's connection starts a pre-vote at once, at term + 1, keeping its own term", () => {
    const h = followerOf2();
    h.node.reportConnectionLost(N('2'));
    const out = drain(h);
    expect(h.node.status().role).toBe('pre-candidate');
    expect(h.node.status().term).toBe(2);
    const pre = ofType(out.messages, MessageType.PreVote);
    expect(pre.map((m) => m.to).sort()).toEqual(['2', '3']);
    expect(pre.every((m) => m.term === 3 && m.index === 2 && m.logTerm === 2)).toBe(true);
    // No hard state changes: no term, no vote.
    expect(out.hardStates).toEqual([]);
  });

  it('the connection to a peer that does not lead changes nothing', () => {
    const h = followerOf2();
    h.node.reportConnectionLost(N('3'));
    expect(drain(h).messages).toEqual([]);
    expect(h.node.status()).toMatchObject({ role: 'follower', leader: '2', term: 2 });
  });

  it.each([
    ['without PreVote', { preVote: false, checkQuorum: true }],
    ['without CheckQuorum', { preVote: true, checkQuorum: false }],
  ])('%s the argument for acting early does not hold: the timer alone decides', (_name, config) => {
    const h = followerOf2(config);
    h.node.reportConnectionLost(N('2'));
    expect(drain(h).messages).toEqual([]);
    expect(h.node.status()).toMatchObject({ role: 'follower', leader: '2', term: 2 });
  });

  it('a learner, which cannot campaign, does not start a pre-vote', () => {
    const h = newNode({ id: '4', voters: three, learners: ['4'], logTerms: [1, 2], term: 2, ...fast });
    h.node.step(msg(MessageType.Heartbeat, '2', '4', 2, { commit: LogIndex(0) }));
    drain(h);
    h.node.reportConnectionLost(N('2'));
    expect(ofType(drain(h).messages, MessageType.PreVote)).toEqual([]);
    expect(h.node.status().role).toBe('follower');
  });

  it('a follower still hearing from its leader ignores the pre-vote of one that lost it (the lease)', () => {
    const voter = newNode({ id: '3', voters: three, logTerms: [1, 2], term: 2, ...fast });
    voter.node.step(msg(MessageType.Heartbeat, '2', '3', 2, { commit: LogIndex(0) }));
    drain(voter);
    voter.node.step(msg(MessageType.PreVote, '1', '3', 3, { index: LogIndex(2), logTerm: Term(2) }));
    expect(ofType(drain(voter).messages, MessageType.PreVoteResponse)).toEqual([]);
  });
});

describe('connection to the leader lost: the ranked pre-vote round', () => {
  /** Node `id` of five, a fast pre-candidate after losing leader 'a' at term 2. */
  function fastPreCandidate(id: string, logTerms: readonly number[] = [1, 2]): ReturnType<typeof newNode> {
    const h = newNode({ id, voters: five, logTerms, term: 2, ...fast });
    h.node.step(msg(MessageType.Heartbeat, 'a', id, 2, { commit: LogIndex(0) }));
    drain(h);
    h.node.reportConnectionLost(N('a'));
    drain(h);
    return h;
  }

  it('grants a claim ranked ahead (as up to date, lower id) and stands aside', () => {
    const c = fastPreCandidate('c');
    c.node.step(msg(MessageType.PreVote, 'b', 'c', 3, { index: LogIndex(2), logTerm: Term(2) }));
    const [resp] = ofType(drain(c).messages, MessageType.PreVoteResponse);
    expect(resp).toMatchObject({ to: 'b', term: 3, reject: false });
    expect(c.node.status()).toMatchObject({ role: 'follower', leader: null, term: 2 });
    // Having stood aside for b, it refuses a claim behind b's in the same round.
    c.node.step(msg(MessageType.PreVote, 'd', 'c', 3, { index: LogIndex(2), logTerm: Term(2) }));
    expect(ofType(drain(c).messages, MessageType.PreVoteResponse)[0]).toMatchObject({ to: 'd', reject: true });
  });

  it('grants a more up-to-date log whatever the id', () => {
    const b = fastPreCandidate('b');
    b.node.step(msg(MessageType.PreVote, 'e', 'b', 3, { index: LogIndex(3), logTerm: Term(2) }));
    expect(ofType(drain(b).messages, MessageType.PreVoteResponse)[0]).toMatchObject({ to: 'e', reject: false });
  });

  it('refuses a claim ranked behind and sends that sender its own pre-vote', () => {
    const b = fastPreCandidate('b');
    b.node.step(msg(MessageType.PreVote, 'd', 'b', 3, { index: LogIndex(2), logTerm: Term(2) }));
    const out = drain(b).messages;
    expect(ofType(out, MessageType.PreVoteResponse)[0]).toMatchObject({ to: 'd', reject: true });
    expect(ofType(out, MessageType.PreVote)[0]).toMatchObject({ to: 'd', term: 3, index: 2, logTerm: 2 });
    expect(b.node.status().role).toBe('pre-candidate');
  });
});

describe("connection to the leader lost: the round's election", () => {
  /** Node 'b' of five at term 2, its leader 'a' just heard from; `lost`: it then loses a's connection. */
  function followerOfA(lost: boolean): ReturnType<typeof newNode> {
    const h = newNode({ id: 'b', voters: five, logTerms: [1, 2], term: 2, ...fast });
    h.node.step(msg(MessageType.Heartbeat, 'a', 'b', 2, { commit: LogIndex(0) }));
    drain(h);
    if (lost) h.node.reportConnectionLost(N('a'));
    drain(h);
    return h;
  }

  /** Grants b's pre-vote from c and d: b turns candidate at term 3. */
  function winPreVote(h: ReturnType<typeof newNode>): void {
    for (const from of ['c', 'd']) h.node.step(msg(MessageType.PreVoteResponse, from, 'b', 3, { reject: false }));
    const out = drain(h).messages;
    expect(h.node.status()).toMatchObject({ role: 'candidate', term: 3 });
    expect(
      ofType(out, MessageType.RequestVote)
        .map((m) => m.to)
        .sort(),
    ).toEqual(['a', 'c', 'd', 'e']);
  }

  /** Ticks until b starts another campaign (a PreVote out), at most `max` ticks; how many it took. */
  function ticksUntilNextCampaign(h: ReturnType<typeof newNode>, max: number): number {
    for (let t = 1; t <= max; t++) {
      h.node.tick();
      if (ofType(drain(h).messages, MessageType.PreVote).length > 0) return t;
    }
    return Infinity;
  }

  it('a candidate of the round whose votes split tries again within a third of the election timeout, not a whole one', () => {
    const h = followerOfA(true);
    winPreVote(h);
    // No vote comes back (split between two candidates of the round): the next attempt is a pre-vote for term 4.
    const ticks = ticksUntilNextCampaign(h, 30);
    expect(ticks).toBeGreaterThanOrEqual(1);
    expect(ticks).toBeLessThanOrEqual(Math.ceil(10 / 3));
    expect(h.node.status()).toMatchObject({ role: 'pre-candidate', term: 3 });
  });

  it('a candidate of an ordinary, timed election keeps the whole randomised election timeout', () => {
    const h = followerOfA(false);
    // The timer runs out (at most two election timeouts): an ordinary pre-vote.
    expect(ticksUntilNextCampaign(h, 20)).toBeLessThanOrEqual(20);
    winPreVote(h);
    expect(ticksUntilNextCampaign(h, 30)).toBeGreaterThanOrEqual(10);
  });
});

describe('connection to the leader lost: a cell', () => {
  it("a dead leader is replaced without a tick, in one election's round trips, when its followers see the reset at once", () => {
    const net = new Network({ ids: five, seed: 7, config: fast });
    const before = electedAndSettled(net);
    net.crash(before.id);
    for (const n of net.live()) n.node.reportConnectionLost(NodeId(before.id));
    const now = net.now;
    // Pre-vote out, answers back, vote out, answers back; one spare round for a resent pre-vote.
    const rounds = roundsUntil(net, () => net.leaders().some((l) => l.node.status().term > before.term), 5);
    expect(rounds).toBeLessThanOrEqual(5);
    expect(net.now).toBe(now);
    const next = net.leader();
    expect(next?.node.status().term).toBe(before.term + 1);
  });

  it('followers that see the reset one after another still elect without a tick', () => {
    const net = new Network({ ids: five, seed: 11, config: fast });
    const before = electedAndSettled(net);
    net.crash(before.id);
    const now = net.now;
    for (const n of net.live()) {
      n.node.reportConnectionLost(NodeId(before.id));
      net.stabilize();
    }
    expect(net.now).toBe(now);
    expect(net.leader()?.node.status().term).toBe(before.term + 1);
  });

  it('a live leader stays in place: its other followers, still hearing from it, refuse the pre-vote', () => {
    const net = new Network({ ids: five, seed: 3, config: fast });
    const before = electedAndSettled(net);
    const follower = net.live().find((n) => n.id !== before.id);
    follower?.node.reportConnectionLost(NodeId(before.id));
    net.stabilize();
    net.tick(30);
    expect(net.leader()?.id).toBe(before.id);
    for (const n of net.live()) expect(n.node.status()).toMatchObject({ term: before.term, leader: before.id });
  });

  it('nor can two of five followers losing the connection together depose it', () => {
    const net = new Network({ ids: five, seed: 5, config: fast });
    const before = electedAndSettled(net);
    for (const n of net
      .live()
      .filter((x) => x.id !== before.id)
      .slice(0, 2))
      n.node.reportConnectionLost(NodeId(before.id));
    net.stabilize();
    net.tick(30);
    expect(net.leader()?.id).toBe(before.id);
    for (const n of net.live()) expect(n.node.status().term).toBe(before.term);
  });

  it('control: with the bug "campaign without pre-vote on connection loss" one reset deposes the live leader', () => {
    const net = new Network({ ids: five, seed: 3, config: { ...fast, bugs: { campaignWithoutPreVoteOnConnectionLoss: true } } });
    const before = electedAndSettled(net);
    const follower = net.live().find((n) => n.id !== before.id);
    follower?.node.reportConnectionLost(NodeId(before.id));
    net.stabilize();
    net.tick(30);
    expect(net.leader()?.node.status().term).toBeGreaterThan(before.term);
  });
});

/**
 * Goal: the dissertation's additions to Raft that the core implements —
 * PreVote (§9.6), CheckQuorum and the leader lease on votes (§6.2, §4.2.3)
 * and leadership transfer (§3.10) — do what the text says, and each one is
 * needed (a control case without it shows the disruption it prevents).
 * Method: hand-driven nodes for the message-level rules; the seeded network
 * for partitions and rejoining nodes.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { ConfChangeType, MessageType } from '../src/index.js';
import { ackAppend, drain, electLeader, msg, newNode, ofType, type Handle } from './helpers.js';
import { bytes, Network } from './network.js';

const three = ['1', '2', '3'];

describe('Dissertation: PreVote', () => {
  it('"Only if the candidate believed it could get votes from a majority of the cluster would it increment its term and start a normal election."', () => {
    const h = newNode({ id: '1', voters: three, term: 1, preVote: true });
    h.node.campaign();
    const out = drain(h);
    expect(h.node.status()).toMatchObject({ role: 'pre-candidate', term: 1 });
    const pre = ofType(out.messages, MessageType.PreVote);
    expect(pre.map((m) => [m.to, m.term])).toEqual([
      ['2', 2],
      ['3', 2],
    ]);
    // Nothing about the term or vote was persisted for a pre-vote.
    expect(out.hardStates).toEqual([]);
    h.node.step(msg(MessageType.PreVoteResponse, '2', '1', 2, { reject: false }));
    expect(h.node.status()).toMatchObject({ role: 'candidate', term: 2 });
  });

  it('a pre-vote is refused to a server whose log is behind, and the pre-candidate returns to follower without raising its term', () => {
    const voter = newNode({ id: '2', voters: three, logTerms: [1, 1, 2], term: 2, preVote: true });
    voter.node.step(msg(MessageType.PreVote, '1', '2', 3, { index: LogIndex(2), logTerm: Term(1) }));
    const [resp] = ofType(drain(voter).messages, MessageType.PreVoteResponse);
    expect(resp).toMatchObject({ reject: true, term: 2 });
    // Granting or refusing a pre-vote changes neither the voter's term nor its vote.
    expect(voter.node.status().term).toBe(2);

    const h = newNode({ id: '1', voters: three, logTerms: [1, 1], term: 2, preVote: true });
    h.node.campaign();
    drain(h);
    h.node.step(msg(MessageType.PreVoteResponse, '2', '1', 2, { reject: true }));
    h.node.step(msg(MessageType.PreVoteResponse, '3', '1', 2, { reject: true }));
    expect(h.node.status()).toMatchObject({ role: 'follower', term: 2 });
  });

  it('a granted pre-vote does not record a vote: the voter may still vote for another candidate in that term', () => {
    const voter = newNode({ id: '2', voters: three, term: 1, preVote: true });
    voter.node.step(msg(MessageType.PreVote, '1', '2', 2, { index: LogIndex(0), logTerm: Term(0) }));
    expect(ofType(drain(voter).messages, MessageType.PreVoteResponse)[0]?.reject).toBe(false);
    voter.node.step(msg(MessageType.RequestVote, '3', '2', 2, { index: LogIndex(0), logTerm: Term(0) }));
    expect(ofType(drain(voter).messages, MessageType.RequestVoteResponse)[0]?.reject).toBe(false);
  });

  it('"a server that was partitioned ... will not be able to increment its term" — and on rejoining it does not depose the leader', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 111 });
    net.one('x', 3);
    const leader = net.waitLeader();
    const cut = ['a', 'b', 'c'].find((id) => id !== leader.id) as string;
    const termBefore = net.get(cut).node.status().term;
    net.isolate(cut);
    net.tick(200);
    expect(net.get(cut).node.status().term).toBe(termBefore);
    net.heal();
    net.tick(50);
    expect(net.leader()?.id).toBe(leader.id);
    expect(leader.node.status().term).toBe(termBefore);
  });

  it('control: without PreVote (and CheckQuorum) the same rejoining server raises its term and deposes the leader', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 111, config: { preVote: false, checkQuorum: false } });
    net.one('x', 3);
    const leader = net.waitLeader();
    const cut = ['a', 'b', 'c'].find((id) => id !== leader.id) as string;
    const termBefore = leader.node.status().term;
    net.isolate(cut);
    net.tick(200);
    expect(net.get(cut).node.status().term).toBeGreaterThan(termBefore + 5);
    net.heal();
    net.tick(50);
    expect(leader.node.status().term).toBeGreaterThan(termBefore);
  });
});

describe('Dissertation: CheckQuorum', () => {
  it('"a leader ... steps down if an election timeout elapses without a successful round of heartbeats to a majority of its cluster"', () => {
    const h = newNode({ id: '1', voters: three, term: 1, checkQuorum: true });
    electLeader(h, three);
    for (let i = 0; i < 9; i++) h.node.tick();
    expect(h.node.status().role).toBe('leader');
    // The votes made the followers count as active for the first round; with silence after, the next round fails.
    for (let i = 0; i < 11; i++) h.node.tick();
    expect(h.node.status()).toMatchObject({ role: 'follower', leader: null });
  });

  it('a leader that hears from a majority every election timeout keeps leading', () => {
    const h = newNode({ id: '1', voters: three, term: 1, checkQuorum: true });
    electLeader(h, three);
    for (let i = 0; i < 100; i++) {
      h.node.tick();
      drain(h);
      h.node.step(msg(MessageType.HeartbeatResponse, '2', '1', 2));
    }
    expect(h.node.status().role).toBe('leader');
  });

  it('"if a server receives a RequestVote request within the minimum election timeout of hearing from a current leader, it does not update its term or grant its vote"', () => {
    const h = newNode({ id: '2', voters: three, term: 1, checkQuorum: true });
    h.node.step(msg(MessageType.Heartbeat, '1', '2', 1, { commit: LogIndex(0) }));
    h.node.step(msg(MessageType.RequestVote, '3', '2', 2, { index: LogIndex(5), logTerm: Term(1) }));
    expect(drain(h).messages.filter((m) => m.type === MessageType.RequestVoteResponse)).toEqual([]);
    expect(h.node.status()).toMatchObject({ term: 1, leader: '1' });
    // Once an election timeout passes without the leader, the request is considered.
    for (let i = 0; i < 10; i++) h.node.tick();
    h.node.step(msg(MessageType.RequestVote, '3', '2', 2, { index: LogIndex(5), logTerm: Term(1) }));
    expect(ofType(drain(h).messages, MessageType.RequestVoteResponse)[0]?.reject).toBe(false);
    expect(h.node.status().term).toBe(2);
  });

  it('a leader in a minority partition steps down; the majority side elects a leader and the minority has none', () => {
    const net = new Network({ ids: ['a', 'b', 'c', 'd', 'e'], seed: 112 });
    net.one('x', 5);
    const old = net.waitLeader();
    const buddy = ['a', 'b', 'c', 'd', 'e'].find((id) => id !== old.id) as string;
    const majority = ['a', 'b', 'c', 'd', 'e'].filter((id) => id !== old.id && id !== buddy);
    net.partition([old.id, buddy], majority);
    net.tick(40);
    expect(old.node.status().role).not.toBe('leader');
    expect(net.get(buddy).node.status().role).not.toBe('leader');
    expect(majority).toContain(net.leader()?.id);
  });
});

describe('Dissertation: Leadership transfer', () => {
  function steady(): Handle {
    const h = newNode({ id: '1', voters: three, term: 1, checkQuorum: true, preVote: true });
    electLeader(h, three);
    ackAppend(h, '2', 1);
    ackAppend(h, '3', 1);
    drain(h);
    return h;
  }

  it('"the prior leader sends a TimeoutNow request to the target server" once the target\'s log is current', () => {
    const h = steady();
    h.node.transferLeadership(NodeId('2'));
    expect(ofType(drain(h).messages, MessageType.TimeoutNow).map((m) => m.to)).toEqual(['2']);
  });

  it('"the prior leader sends its log entries to the target server" first when the target is behind, then TimeoutNow', () => {
    const h = steady();
    h.node.propose(bytes('x'));
    drain(h);
    ackAppend(h, '3', 2);
    drain(h);
    h.node.transferLeadership(NodeId('2'));
    const first = drain(h).messages;
    expect(ofType(first, MessageType.TimeoutNow)).toEqual([]);
    ackAppend(h, '2', 2);
    expect(ofType(drain(h).messages, MessageType.TimeoutNow).map((m) => m.to)).toEqual(['2']);
  });

  it('"This request has the same effect as the target server\'s election timer firing": it campaigns at once, past the vote lease', () => {
    const target = newNode({ id: '2', voters: three, term: 1, checkQuorum: true, preVote: true });
    target.node.step(msg(MessageType.Heartbeat, '1', '2', 1, { commit: LogIndex(0) }));
    target.node.step(msg(MessageType.TimeoutNow, '1', '2', 1));
    const votes = ofType(drain(target).messages, MessageType.RequestVote);
    // A real election (no pre-vote), flagged as a transfer so voters in a lease still answer.
    expect(votes.map((m) => [m.to, m.term, m.transfer])).toEqual([
      ['1', 2, true],
      ['3', 2, true],
    ]);
    const voter = newNode({ id: '3', voters: three, term: 1, checkQuorum: true, preVote: true });
    voter.node.step(msg(MessageType.Heartbeat, '1', '3', 1, { commit: LogIndex(0) }));
    voter.node.step(votes[1] as (typeof votes)[number]);
    expect(ofType(drain(voter).messages, MessageType.RequestVoteResponse)[0]?.reject).toBe(false);
  });

  it('"the prior leader stops accepting new client requests" during a transfer', () => {
    const h = steady();
    h.node.transferLeadership(NodeId('2'));
    expect(h.node.propose(bytes('x'))).toBeNull();
    expect(h.node.proposeConfChange({ type: ConfChangeType.AddLearner, node: NodeId('9') })).toBeNull();
  });

  it('"If the transfer does not complete within about an election timeout, the prior leader aborts the transfer and resumes accepting client requests."', () => {
    const h = steady();
    h.node.transferLeadership(NodeId('2'));
    drain(h);
    for (let i = 0; i < 9; i++) {
      h.node.tick();
      drain(h);
      h.node.step(msg(MessageType.HeartbeatResponse, '3', '1', 2));
    }
    expect(h.node.propose(bytes('x'))).toBeNull();
    h.node.tick();
    expect(h.node.status().role).toBe('leader');
    expect(h.node.propose(bytes('x'))).not.toBeNull();
  });

  it('a transfer to itself, to a learner or to an unknown server is ignored', () => {
    const h = newNode({ id: '1', voters: three, learners: ['4'], term: 1 });
    electLeader(h, three);
    ackAppend(h, '2', 1);
    drain(h);
    for (const to of ['1', '4', '9']) {
      h.node.transferLeadership(NodeId(to));
      expect(ofType(drain(h).messages, MessageType.TimeoutNow)).toEqual([]);
      expect(h.node.propose(bytes(`p${to}`))).not.toBeNull();
    }
  });

  it('in a cluster, leadership moves to the chosen server in the next term and the cluster keeps committing', () => {
    const net = new Network({ ids: ['a', 'b', 'c', 'd', 'e'], seed: 121 });
    for (let round = 0; round < 4; round++) {
      net.one(`before${round}`, 5);
      const old = net.waitLeader();
      const term = old.node.status().term;
      const target = net.rnd.pick(['a', 'b', 'c', 'd', 'e'].filter((id) => id !== old.id));
      old.node.transferLeadership(NodeId(target));
      net.tick(3);
      const now = net.waitLeader();
      expect(now.id).toBe(target);
      expect(now.node.status().term).toBe(term + 1);
      net.one(`after${round}`, 5);
    }
  });
});

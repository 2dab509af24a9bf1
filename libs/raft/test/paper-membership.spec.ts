/**
 * Goal: cluster membership changes (Raft paper §6, as refined by the
 * dissertation's §4.1 single-server changes and its 2015 erratum) are safe
 * and do what an operator expects: add a voter, add a learner and promote
 * it, remove a follower or the leader itself, one change at a time.
 * Method: hand-driven nodes for the rules (when a change may start, when a
 * configuration takes effect, what a removed leader does); the seeded
 * network for whole-cluster behaviour, with its safety checks on.
 *
 * The implementation's choice, stated here because tests depend on it: a
 * configuration takes effect on each server when its ConfChange entry is
 * appended to that server's log (committed or not), and is rolled back if
 * that entry is overwritten.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { ConfChangeType, EntryType, MessageType, encodeConfChange, type ConfChange } from '../src/index.js';
import { ackAppend, drain, electLeader, msg, newNode, ofType } from './helpers.js';
import { bytes, Network, sortedConf } from './network.js';

const three = ['1', '2', '3'];
const addVoter = (node: string): ConfChange => ({ type: ConfChangeType.AddVoter, node: NodeId(node) });
const addLearner = (node: string): ConfChange => ({ type: ConfChangeType.AddLearner, node: NodeId(node) });
const remove = (node: string): ConfChange => ({ type: ConfChangeType.RemoveNode, node: NodeId(node) });

function confEntry(index: number, term: number, change: ConfChange) {
  return { index: LogIndex(index), term: Term(term), type: EntryType.ConfChange, data: encodeConfChange(change) };
}

describe('§6 Cluster membership changes', () => {
  it('(2015 fix) "a leader may not append a new configuration entry until it has committed an entry from its current term"', () => {
    const h = newNode({ id: '1', voters: three, logTerms: [1], term: 1 });
    electLeader(h, three);
    expect(h.node.proposeConfChange(addVoter('4'))).toBeNull();
    ackAppend(h, '2', 2);
    drain(h);
    expect(h.node.proposeConfChange(addVoter('4'))).toBe(3);
  });

  it('"the leader will not begin a new configuration change until the previous one is committed" (dissertation §4.1)', () => {
    const h = newNode({ id: '1', voters: three, term: 1 });
    electLeader(h, three);
    ackAppend(h, '2', 1);
    drain(h);
    expect(h.node.proposeConfChange(addLearner('4'))).toBe(2);
    drain(h);
    expect(h.node.proposeConfChange(addLearner('5'))).toBeNull();
    ackAppend(h, '2', 2);
    drain(h);
    expect(h.node.proposeConfChange(addLearner('5'))).toBe(3);
  });

  it('"a server always uses the latest configuration in its log, regardless of whether the entry is committed"', () => {
    const h = newNode({ id: '2', voters: three, term: 1 });
    h.node.step(
      msg(MessageType.AppendEntries, '1', '2', 1, {
        index: LogIndex(0),
        logTerm: Term(0),
        entries: [confEntry(1, 1, addVoter('4'))],
        commit: LogIndex(0),
      }),
    );
    drain(h);
    expect(h.node.status().commit).toBe(0);
    expect([...h.node.status().voters]).toEqual(['1', '2', '3', '4']);
  });

  it('a configuration whose entry is overwritten by a new leader is rolled back to the one before it', () => {
    const h = newNode({ id: '2', voters: three, term: 1 });
    h.node.step(
      msg(MessageType.AppendEntries, '1', '2', 1, {
        index: LogIndex(0),
        logTerm: Term(0),
        entries: [confEntry(1, 1, remove('3'))],
        commit: LogIndex(0),
      }),
    );
    drain(h);
    expect([...h.node.status().voters]).toEqual(['1', '2']);
    const blank = { index: LogIndex(1), term: Term(2), type: EntryType.Normal, data: new Uint8Array(0) };
    h.node.step(
      msg(MessageType.AppendEntries, '3', '2', 2, { index: LogIndex(0), logTerm: Term(0), entries: [blank], commit: LogIndex(0) }),
    );
    drain(h);
    expect([...h.node.status().voters]).toEqual(['1', '2', '3']);
  });

  it('AddVoter: a new server joins empty, catches up, and its vote then counts toward the majority', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 81 });
    for (let i = 0; i < 5; i++) net.one(`before${i}`, 3);
    for (const id of ['d', 'e']) {
      net.addNode(id, undefined);
      net.changeConf(addVoter(id));
    }
    net.one('after', 5);
    expect(net.get('e').machine.commands).toEqual([...Array.from({ length: 5 }, (_, i) => `before${i}`), 'after']);
    // With five voters, two of the original three gone still leaves a majority — only counting the new ones.
    const leader = net.waitLeader().id;
    const originals = ['a', 'b', 'c'].filter((id) => id !== leader);
    for (const id of originals) net.crash(id);
    net.one('with-new-voters', 3);
    expect(sortedConf({ voters: net.get('d').node.status().voters, learners: [] })).toBe('voters=a,b,c,d,e learners=');
  });

  it('AddLearner: "non-voting members ... receive log entries but are not considered for majorities"; promoted with AddVoter', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 82 });
    net.addNode('l', undefined);
    net.changeConf(addLearner('l'));
    net.one('x', 4);
    expect(net.get('l').machine.commands).toEqual(['x']);
    expect(net.get('l').node.status().learners).toEqual(['l']);
    // Leader plus learner are not a majority of the three voters.
    const leader = net.waitLeader();
    const others = ['a', 'b', 'c'].filter((id) => id !== leader.id);
    for (const id of others) net.isolate(id);
    const index = leader.node.propose(bytes('y')) as number;
    net.tick(5);
    expect(leader.node.status().commit).toBeLessThan(index);
    // A learner never campaigns, however long it hears nothing.
    net.isolate('l');
    const termBefore = net.get('l').node.status().term;
    net.tick(100);
    expect(net.get('l').node.status()).toMatchObject({ role: 'follower', term: termBefore });
    net.heal();
    net.waitLeader();
    net.changeConf(addVoter('l'));
    expect(net.get('l').node.status().voters).toContain('l');
    expect(net.get('l').node.status().learners).toEqual([]);
    net.one('z', 4);
  });

  it('RemoveNode: a removed follower no longer counts, so the rest commit with a majority of the smaller cluster', () => {
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const net = new Network({ ids, seed: 83 });
    net.one('x', 5);
    const leader = net.waitLeader().id;
    const [r1, r2, r3] = ids.filter((id) => id !== leader) as [string, string, string];
    net.changeConf(remove(r1));
    net.changeConf(remove(r2));
    net.crash(r1);
    net.crash(r2);
    // Three voters left; one more down still leaves two of three.
    net.crash(r3);
    net.one('y', 2);
  });

  it('"the leader ... steps down (returns to follower state) once it has committed the Cnew log entry", not counting itself in majorities meanwhile', () => {
    const h = newNode({ id: '1', voters: three, term: 1 });
    electLeader(h, three);
    ackAppend(h, '2', 1);
    drain(h);
    expect(h.node.proposeConfChange(remove('1'))).toBe(2);
    drain(h);
    // The new configuration {2, 3} is in force on the leader: its own copy does not count.
    ackAppend(h, '2', 2);
    drain(h);
    expect(h.node.status()).toMatchObject({ role: 'leader', commit: 1 });
    ackAppend(h, '3', 2);
    const out = drain(h);
    expect(h.node.status().role).toBe('follower');
    expect(h.node.status().commit).toBe(2);
    // It told the others of the commit before stepping down.
    expect(ofType(out.messages, MessageType.AppendEntries).every((m) => m.commit === 2)).toBe(true);
    // And, no longer a voter, it never campaigns.
    for (let i = 0; i < 50; i++) h.node.tick();
    expect(h.node.status().role).toBe('follower');
  });

  it('removing the leader in a live cluster: the rest elect a new leader and keep committing', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 84 });
    net.one('x', 3);
    const old = net.waitLeader().id;
    net.changeConf(remove(old));
    const fresh = net.waitLeader();
    expect(fresh.id).not.toBe(old);
    net.one('y', 2);
    expect(net.get(old).node.status().role).toBe('follower');
  });

  it('"Removed servers ... can disrupt the cluster": a removed server that missed its removal cannot depose the leader, since "servers disregard RequestVote RPCs when they believe a current leader exists"', () => {
    const net = new Network({ ids: ['a', 'b', 'c', 'd'], seed: 85 });
    net.one('x', 4);
    const leader = net.waitLeader();
    const gone = ['a', 'b', 'c', 'd'].find((id) => id !== leader.id) as string;
    net.isolate(gone);
    net.changeConf(remove(gone));
    net.heal();
    const term = leader.node.status().term;
    net.tick(200);
    expect(net.leader()?.id).toBe(leader.id);
    expect(leader.node.status().term).toBe(term);
    net.one('y', 3);
  });

  it('membership survives restarts: the core rebuilds it from the ConfChange entries in its log', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 86 });
    net.addNode('d', undefined);
    net.changeConf(addLearner('d'));
    net.changeConf(addVoter('d'));
    const leader = net.waitLeader().id;
    const removed = leader === 'a' ? 'b' : 'a';
    net.changeConf(remove(removed));
    net.tick(5);
    for (const id of ['a', 'b', 'c', 'd']) {
      // (The removed server may never learn of its removal: the leader stops sending to it at once.)
      const before = net.get(id).node.status();
      net.crash(id);
      net.restart(id);
      const after = net.get(id).node.status();
      expect([after.voters, after.learners]).toEqual([before.voters, before.learners]);
    }
    expect(net.get('d').node.status().voters).toEqual(['a', 'b', 'c', 'd'].filter((id) => id !== removed));
    net.one('after-restart', 3);
  });

  it('a change that would leave no voter is refused', () => {
    const h = newNode({ id: '1', voters: ['1'], term: 1 });
    electLeader(h, ['1']);
    drain(h);
    expect(h.node.proposeConfChange(remove('1'))).toBeNull();
    expect(h.node.proposeConfChange(addLearner('1'))).toBeNull();
    expect(h.node.proposeConfChange(addVoter('2'))).toBe(2);
  });

  it('votes of learners do not count toward winning an election', () => {
    const h = newNode({ id: '1', voters: three, learners: ['4', '5'], term: 1 });
    h.node.campaign();
    const out = drain(h);
    // RequestVote goes to voters only, and learners' grants change nothing.
    expect(
      ofType(out.messages, MessageType.RequestVote)
        .map((m) => m.to)
        .sort(),
    ).toEqual(['2', '3']);
    h.node.step(msg(MessageType.RequestVoteResponse, '4', '1', 2));
    h.node.step(msg(MessageType.RequestVoteResponse, '5', '1', 2));
    expect(h.node.status().role).toBe('candidate');
    h.node.step(msg(MessageType.RequestVoteResponse, '2', '1', 2));
    expect(h.node.status().role).toBe('leader');
  });
});

describe('Learners and removed servers without a leader', () => {
  // A node that cannot campaign still needs §5.2's "assumes there is no viable
  // leader": the member that leads next may be one it has never heard of.
  const electionTicks = 10;
  const heartbeat = (from: string, to: string, term: number) => msg(MessageType.Heartbeat, from, to, term, { commit: LogIndex(0) });

  function following(id: string, voters: readonly string[], learners: readonly string[]) {
    const h = newNode({ id, voters, learners, term: 1, electionTicks });
    h.node.step(heartbeat('1', id, 1));
    drain(h);
    expect(h.node.status()).toMatchObject({ leader: '1', term: 1 });
    return h;
  }

  it('a learner that hears nothing for a randomized election timeout forgets its leader, and nothing else', () => {
    const h = following('4', three, ['4']);
    // The randomized timeout lies in [electionTicks, 2 * electionTicks).
    for (let i = 0; i < electionTicks - 1; i++) h.node.tick();
    expect(h.node.status().leader).toBe('1');
    const before = h.node.status();
    for (let i = 0; i < electionTicks + 1; i++) h.node.tick();
    const out = drain(h);
    expect(h.node.status()).toMatchObject({ role: 'follower', leader: null, term: 1, commit: before.commit, lastIndex: before.lastIndex });
    expect(out.softState).toEqual({ leader: null, role: 'follower' });
    expect(out.messages).toEqual([]);
    expect(out.hardStates).toEqual([]);
  });

  it('a message from its leader before the timeout keeps the leader', () => {
    const h = following('4', three, ['4']);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < electionTicks - 1; i++) h.node.tick();
      h.node.step(heartbeat('1', '4', 1));
      drain(h);
    }
    // 45 ticks in all, never electionTicks without a heartbeat.
    expect(h.node.status()).toMatchObject({ leader: '1', term: 1 });
  });

  it('a server removed from the configuration forgets its leader too', () => {
    const h = following('9', three, []);
    for (let i = 0; i < 2 * electionTicks; i++) h.node.tick();
    expect(h.node.status()).toMatchObject({ role: 'follower', leader: null, term: 1 });
  });

  it('a learner without a leader follows the next leader that reaches it, at a higher term', () => {
    const h = following('4', three, ['4']);
    for (let i = 0; i < 2 * electionTicks; i++) h.node.tick();
    expect(h.node.status().leader).toBeNull();
    // '5' joined and leads at term 3 while '4' heard nothing: not a member this learner knows.
    const blank = { index: LogIndex(1), term: Term(3), type: EntryType.Normal, data: new Uint8Array(0) };
    h.node.step(
      msg(MessageType.AppendEntries, '5', '4', 3, { index: LogIndex(0), logTerm: Term(0), entries: [blank], commit: LogIndex(1) }),
    );
    const out = drain(h);
    expect(h.node.status()).toMatchObject({ role: 'follower', leader: '5', term: 3, commit: 1 });
    expect(ofType(out.messages, MessageType.AppendEntriesResponse).map((m) => [m.to, m.index, m.reject])).toEqual([['5', 1, undefined]]);
    // It follows '5' now: '5' keeps it, '1' from the old term does not win it back.
    for (let i = 0; i < electionTicks - 1; i++) h.node.tick();
    h.node.step(heartbeat('5', '4', 3));
    expect(h.node.step(heartbeat('1', '4', 1))).toBeNull();
    expect(h.node.status()).toMatchObject({ leader: '5', term: 3 });
  });

  it('a voter still campaigns after the timeout instead (its leader goes with the election)', () => {
    const h = following('2', three, ['4']);
    for (let i = 0; i < 2 * electionTicks; i++) h.node.tick();
    expect(h.node.status()).toMatchObject({ role: 'candidate', leader: null, term: 2 });
  });
});

/**
 * Goal: the Raft paper's §5.4 (safety) holds: the election restriction
 * (§5.4.1), committing only current-term entries by counting (§5.4.2,
 * Figure 8), and the properties of Figure 3 (Leader Append-Only, Log
 * Matching, Leader Completeness, State Machine Safety) under crashes and an
 * unreliable network.
 * Method: hand-driven nodes for the rules; the Figure 8 scenario replayed
 * step by step; the course's Figure 8 and Figure 8 (unreliable) tests on
 * the seeded network, whose harness checks the Figure 3 properties as it
 * runs and throws on any violation.
 */
import { describe, expect, it } from 'vitest';
import { replayFigure8 } from './figure8.js';
import { LogIndex, Term } from '@fencer/base';
import { MessageType, type Entry } from '../src/index.js';
import { ackAppend, drain, electLeader, msg, newNode, ofType } from './helpers.js';
import { bytes, Network } from './network.js';

const five = ['1', '2', '3', '4', '5'];

describe('§5.4 Safety', () => {
  it.each([
    // voter log terms, candidate last (index, term), granted?
    [[1], 1, 1, true],
    [[1], 2, 1, true],
    [[1, 1], 1, 1, false],
    [[1], 1, 2, true],
    [[1, 2], 1, 3, true],
    [[2], 1, 1, false],
    [[2], 2, 1, false],
    [[1, 2], 2, 2, true],
  ] as const)(
    '§5.4.1 "the voter denies its vote if its own log is more up-to-date than that of the candidate" (voter %j, candidate %i@t%i)',
    (voterTerms, index, logTerm, granted) => {
      const h = newNode({ id: '1', voters: five, logTerms: voterTerms, term: 3 });
      h.node.step(msg(MessageType.RequestVote, '2', '1', 4, { index: LogIndex(index), logTerm: Term(logTerm) }));
      const [resp] = ofType(drain(h).messages, MessageType.RequestVoteResponse);
      expect(resp?.reject).toBe(!granted);
    },
  );

  it('§5.4.1 "If the logs have last entries with different terms, then the log with the later term is more up-to-date. If the logs end with the same term, then whichever log is longer is more up-to-date."', () => {
    // A candidate with a shorter log of a later term wins the vote of a longer, older log; and vice versa it loses.
    const longOld = newNode({ id: '1', voters: five, logTerms: [1, 1, 1, 1, 1], term: 2 });
    longOld.node.step(msg(MessageType.RequestVote, '2', '1', 3, { index: LogIndex(2), logTerm: Term(2) }));
    expect(ofType(drain(longOld).messages, MessageType.RequestVoteResponse)[0]?.reject).toBe(false);
    const shortNew = newNode({ id: '1', voters: five, logTerms: [1, 2], term: 2 });
    shortNew.node.step(msg(MessageType.RequestVote, '2', '1', 3, { index: LogIndex(5), logTerm: Term(1) }));
    expect(ofType(drain(shortNew).messages, MessageType.RequestVoteResponse)[0]?.reject).toBe(true);
  });

  it('§5.4.2 "Raft never commits log entries from previous terms by counting replicas."', () => {
    const h = newNode({ id: '1', voters: five, logTerms: [1, 2], term: 2, commit: 1 });
    electLeader(h, five);
    // Index 2 (term 2) now sits on three of five, yet stays uncommitted.
    ackAppend(h, '2', 2);
    ackAppend(h, '3', 2);
    expect(drain(h).committed).toEqual([]);
    expect(h.node.status().commit).toBe(1);
    // "Only log entries from the leader's current term are committed by counting replicas" — and then the earlier ones with it.
    ackAppend(h, '2', 3);
    ackAppend(h, '3', 3);
    expect(drain(h).committed.map((e: Entry) => [e.index, e.term])).toEqual([
      [2, 2],
      [3, 3],
    ]);
  });

  it('§5.4.2 Figure 8: an entry of an old term stored on a majority is not committed, so a later leader may overwrite it safely', () => {
    const applied = replayFigure8({});
    // S1 never applied index 2; S5 (and the others) apply its term-3 entry there.
    expect(applied.get('1')?.has(2)).toBe(false);
    const at2 = new Set<number>();
    for (const m of applied.values()) if (m.has(2)) at2.add(m.get(2) as number);
    expect([...at2]).toEqual([3]);
  });

  it('"Leader Completeness: if a log entry is committed in a given term, then that entry will be present in the logs of the leaders for all higher-numbered terms"', () => {
    // The harness checks every new leader's log against everything applied anywhere.
    const net = new Network({ ids: ['a', 'b', 'c', 'd', 'e'], seed: 51 });
    for (let i = 0; i < 12; i++) {
      net.one(`x${i}`, 3);
      const l = net.waitLeader();
      net.isolate(l.id);
      net.tick(30);
      net.heal();
    }
    expect(net.leaderCompletenessChecks).toBeGreaterThan(10);
    net.checkLogMatching();
  });

  it('Figure 8 (course): with leaders crashing at random, committed entries survive and every server applies the same ones', () => {
    for (const seed of [61, 62, 63]) {
      const net = new Network({ ids: ['a', 'b', 'c', 'd', 'e'], seed });
      net.one('start', 5);
      let cmd = 0;
      for (let iter = 0; iter < 120; iter++) {
        const leader = net.leader();
        if (leader !== undefined) leader.node.propose(bytes(`f${cmd++}`));
        net.tick(net.rnd.chance(0.1) ? net.rnd.range(1, 30) : net.rnd.range(1, 4));
        if (leader !== undefined && net.rnd.chance(0.5)) net.crash(leader.id);
        if (net.live().length < 3) {
          const down = [...net.down];
          net.restart(net.rnd.pick(down));
        }
      }
      for (const id of [...net.down]) net.restart(id);
      net.one('end', 5);
      net.checkLogMatching();
      const all = net.get('a').machine.commands;
      for (const n of net.nodes.values()) expect(n.machine.commands).toEqual(all);
    }
  });

  it('Figure 8 unreliable (course): with a lossy, slow, reordering network and leaders cut off at random, servers still agree', () => {
    for (const seed of [71, 72]) {
      const net = new Network({ ids: ['a', 'b', 'c', 'd', 'e'], seed });
      net.one('start', 5);
      net.dropRate = 0.1;
      net.delayTicksMax = 4;
      net.duplicateRate = 0.05;
      let cmd = 0;
      for (let iter = 0; iter < 200; iter++) {
        if (iter % 20 === 0) for (const n of net.live()) n.node.propose(bytes(`noise${cmd++}`));
        const leader = net.leader();
        if (leader !== undefined) leader.node.propose(bytes(`u${cmd++}`));
        net.tick(net.rnd.chance(0.1) ? net.rnd.range(1, 20) : 1);
        if (leader !== undefined && net.rnd.chance(0.1)) net.isolate(leader.id);
        if (net.rnd.chance(0.1)) net.heal();
      }
      net.heal();
      net.dropRate = 0;
      net.delayTicksMax = 0;
      net.duplicateRate = 0;
      net.one('end', 5);
      net.checkLogMatching();
      const all = net.get('a').machine.commands;
      for (const n of net.nodes.values()) expect(n.machine.commands).toEqual(all);
      expect(all.length).toBeGreaterThan(20);
    }
  });

  it('"a leader never overwrites or deletes entries in its log; it only appends new entries" (Leader Append-Only), even when told of a conflict', () => {
    const h = newNode({ id: '1', voters: five, logTerms: [1, 1], term: 1 });
    electLeader(h, five);
    const before = h.node.status().lastIndex;
    // A follower's rejection with any hint changes what the leader sends, never its log.
    h.node.step(
      msg(MessageType.AppendEntriesResponse, '2', '1', 2, {
        index: LogIndex(2),
        reject: true,
        rejectHint: LogIndex(0),
        rejectTerm: Term(0),
      }),
    );
    drain(h);
    expect(h.node.status().lastIndex).toBe(before);
    expect(h.storage.term(LogIndex(1))).toBe(1);
  });
});

/**
 * Goal: each test-only bug switch in RaftConfig.bugs really puts its bug
 * back (so the simulator's "catches each bug" tests mean something), and
 * the same scenario is safe with the switch off.
 * Method: for each switch, the smallest hand-driven scenario that turns the
 * bug into a visible violation (two leaders in a term, a committed entry
 * overwritten, a stale read, two membership changes in flight, a stale
 * leader obeyed), run with the switch on and off.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { ConfChangeType, MessageType, type RaftBug } from '../src/index.js';
import { ackAppend, drain, electLeader, msg, newNode, ofType, storedTerms, type Handle } from './helpers.js';
import { replayFigure8 } from './figure8.js';
import { bytes } from './network.js';

const three = ['1', '2', '3'];
type Bugs = Partial<Record<RaftBug, boolean>>;

/** Two candidates in term 2; node 1 votes for 2, crashes, restarts, and is asked by 3. Returns the leaders of term 2. */
function doubleVote(bugs: Bugs): string[] {
  const n1 = newNode({ id: '1', voters: three, term: 1, bugs });
  const n2 = newNode({ id: '2', voters: three, term: 1, bugs });
  const n3 = newNode({ id: '3', voters: three, term: 1, bugs });
  n2.node.campaign();
  n3.node.campaign();
  const from2 = ofType(drain(n2).messages, MessageType.RequestVote);
  const from3 = ofType(drain(n3).messages, MessageType.RequestVote);
  n1.node.step(from2.find((m) => m.to === '1') as (typeof from2)[number]);
  for (const m of drain(n1).messages) n2.node.step(m);
  drain(n2);
  // Node 1 crashes and restarts from what it persisted.
  const n1b: Handle = newNode({ id: '1', voters: three, storage: n1.storage, bugs });
  n1b.node.step(from3.find((m) => m.to === '1') as (typeof from3)[number]);
  for (const m of drain(n1b).messages) n3.node.step(m);
  drain(n3);
  return [n2, n3].filter((h) => h.node.status().role === 'leader' && h.node.status().term === 2).map((h) => h.config.id);
}

function staleRead(bugs: Bugs): number[] {
  // Entries 2 and 3 were committed by the previous leader; node 1 has them but does not know they committed.
  const h = newNode({ id: '1', voters: three, logTerms: [1, 1, 1], term: 1, commit: 1, bugs });
  electLeader(h, three);
  h.node.readIndex('r');
  const out = drain(h);
  const indexes = out.readStates.map((r) => r.index as number);
  for (const beat of ofType(out.messages, MessageType.Heartbeat).filter((m) => m.context !== undefined)) {
    h.node.step(msg(MessageType.HeartbeatResponse, beat.to, '1', 2, { context: beat.context as string }));
  }
  indexes.push(...drain(h).readStates.map((r) => r.index as number));
  // Complete the picture: once the blank entry commits, any deferred read comes out too.
  ackAppend(h, '2', 4);
  const after = drain(h);
  for (const beat of ofType(after.messages, MessageType.Heartbeat).filter((m) => m.context !== undefined)) {
    h.node.step(msg(MessageType.HeartbeatResponse, beat.to, '1', 2, { context: beat.context as string }));
  }
  indexes.push(...after.readStates.map((r) => r.index as number), ...drain(h).readStates.map((r) => r.index as number));
  return indexes;
}

describe('Test-only bug switches', () => {
  it('commitPreviousTermByCounting: the Figure 8 leader commits an old-term entry that a later leader overwrites', () => {
    const withBug = replayFigure8({ commitPreviousTermByCounting: true });
    expect(withBug.get('1')?.get(2)).toBe(2);
    expect(withBug.get('5')?.get(2)).toBe(3);
    const without = replayFigure8({});
    expect(without.get('1')?.has(2)).toBe(false);
  });

  it('voteBeforePersist: the granted vote is left out of the persisted hard state, so a restart votes twice and a term gets two leaders', () => {
    expect(doubleVote({ voteBeforePersist: true }).sort()).toEqual(['2', '3']);
    expect(doubleVote({})).toEqual(['2']);
  });

  it('readIndexBeforeBlankCommit: a new leader serves a read at a commit index older than what was already committed', () => {
    expect(staleRead({ readIndexBeforeBlankCommit: true })[0]).toBe(1);
    expect(staleRead({})).toEqual([4]);
  });

  it('concurrentConfChange: a second membership change starts before the first commits', () => {
    const run = (bugs: Bugs): (number | null)[] => {
      const h = newNode({ id: '1', voters: three, term: 1, bugs });
      electLeader(h, three);
      ackAppend(h, '2', 1);
      drain(h);
      return [
        h.node.proposeConfChange({ type: ConfChangeType.AddLearner, node: NodeId('4') }),
        h.node.proposeConfChange({ type: ConfChangeType.AddVoter, node: NodeId('5') }),
      ];
    };
    expect(run({ concurrentConfChange: true })).toEqual([2, 3]);
    expect(run({})).toEqual([2, null]);
  });

  it('acceptStaleTerm: a follower obeys a deposed leader (adopting it and its entries), and a candidate counts a stale vote', () => {
    const follower = (bugs: Bugs): { leader: string | null; terms: number[] } => {
      const h = newNode({ id: '2', voters: three, logTerms: [1, 1], term: 3, bugs });
      const stale = { index: LogIndex(3), term: Term(2), type: 0 as const, data: bytes('old') };
      h.node.step(
        msg(MessageType.AppendEntries, '3', '2', 2, { index: LogIndex(2), logTerm: Term(1), entries: [stale], commit: LogIndex(0) }),
      );
      drain(h);
      return { leader: h.node.status().leader, terms: storedTerms(h.storage) };
    };
    expect(follower({ acceptStaleTerm: true })).toEqual({ leader: '3', terms: [1, 1, 2] });
    expect(follower({})).toEqual({ leader: null, terms: [1, 1] });

    const candidate = (bugs: Bugs): string => {
      const h = newNode({ id: '1', voters: three, term: 2, bugs });
      h.node.campaign();
      drain(h);
      h.node.step(msg(MessageType.RequestVoteResponse, '2', '1', 2, { reject: false }));
      return h.node.status().role;
    };
    expect(candidate({ acceptStaleTerm: true })).toBe('leader');
    expect(candidate({})).toBe('candidate');
  });
});

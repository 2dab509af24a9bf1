/**
 * Goal: the readiness rule of a cell node (src/readiness.ts): ready only when
 * it follows a known leader and has applied what that leader said it had
 * committed, within READY_LAG_ENTRIES_MAX; a follower's own commit index is
 * never trusted for it; a new term or another leader starts the mark over;
 * a follower that has not heard its leader for leaderSilentMsMax is not
 * ready; a leader is ready once it has applied its commit index; a stopped replica
 * or a non-member is never ready.
 * Method: the tracker fed literal Raft messages and replica views, on a
 * clock the test sets.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { MessageType, type Message } from '@fencer/raft';
import { CatchUpTracker, READY_LAG_ENTRIES_MAX, type ReplicaView } from '../src/readiness.js';

const msg = (type: Message['type'], from: string, term: number, fields: Partial<Message> = {}): Message => ({
  type,
  from: NodeId(from),
  to: NodeId('r1'),
  term: Term(term),
  ...fields,
});
const append = (from: string, term: number, commit: number): Message =>
  msg(MessageType.AppendEntries, from, term, { commit: LogIndex(commit), index: LogIndex(0), logTerm: Term(0), entries: [] });
const follower = (over: Partial<ReplicaView> = {}): ReplicaView => ({
  stopped: false,
  leader: 'r2',
  isLeader: false,
  term: 3,
  commit: 10,
  applied: 10,
  isMember: true,
  ...over,
});

const SILENT_MS_MAX = 2_000;
let nowMs = 0;

describe('CatchUpTracker', () => {
  it('is not ready before the leader has stated its commit index, however caught up the follower thinks it is', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    const r = t.check(follower());
    expect(r).toEqual({ ok: false, reason: 'following r2 but has not heard its commit index yet' });
  });

  it('compares the applied index with the leader’s commit, allowing READY_LAG_ENTRIES_MAX', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    t.observe(append('r2', 3, 5_000));
    expect(t.check(follower({ applied: 3_000 }))).toEqual({
      ok: false,
      reason: 'catching up: applied 3000, the leader had committed 5000 (2000 behind)',
    });
    expect(t.check(follower({ applied: 5_000 - READY_LAG_ENTRIES_MAX })).ok).toBe(true);
    expect(t.check(follower({ applied: 5_000 - READY_LAG_ENTRIES_MAX - 1 })).ok).toBe(false);
  });

  it('keeps the highest mark of the term: a heartbeat’s min(match, commit) does not lower it', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    t.observe(append('r2', 3, 5_000));
    t.observe(msg(MessageType.Heartbeat, 'r2', 3, { commit: LogIndex(10) }));
    expect(t.check(follower({ applied: 10 })).ok).toBe(false);
  });

  it('takes a quiet cell’s heartbeat as the mark, and ignores a zero one', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    t.observe(msg(MessageType.Heartbeat, 'r2', 3, { commit: LogIndex(0) }));
    expect(t.check(follower()).ok).toBe(false);
    t.observe(msg(MessageType.Heartbeat, 'r2', 3, { commit: LogIndex(10) }));
    expect(t.check(follower()).ok).toBe(true);
  });

  it('counts a snapshot being sent as the leader’s mark', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    const meta = { index: LogIndex(50_000), term: Term(3), conf: { voters: [], learners: [] } };
    t.observe(msg(MessageType.InstallSnapshot, 'r2', 3, { snapshotMeta: meta }));
    expect(t.check(follower({ applied: 0 })).ok).toBe(false);
    expect(t.check(follower({ applied: 50_000 })).ok).toBe(true);
  });

  it('starts over with a new term or leader: an old leader’s mark says nothing of the new one', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    t.observe(append('r2', 3, 10));
    expect(t.check(follower({ leader: 'r3', term: 4 })).ok).toBe(false);
    t.observe(append('r3', 4, 12));
    expect(t.check(follower({ leader: 'r3', term: 4, applied: 12 })).ok).toBe(true);
    // Vote traffic is no leader's word.
    t.observe(msg(MessageType.RequestVote, 'r4', 5, { index: LogIndex(99), logTerm: Term(4) }));
    expect(t.check(follower({ leader: 'r3', term: 4, applied: 12 })).ok).toBe(true);
  });

  it('a leader is ready once it has applied its own commit index (within the lag)', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    expect(t.check(follower({ leader: 'r1', isLeader: true, commit: 10, applied: 10 })).ok).toBe(true);
    expect(t.check(follower({ leader: 'r1', isLeader: true, commit: 5_000, applied: 10 })).ok).toBe(false);
  });

  it('is not ready once the leader has been silent longer than leaderSilentMsMax', () => {
    nowMs = 1_000;
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    t.observe(append('r2', 3, 10));
    nowMs += SILENT_MS_MAX;
    expect(t.check(follower()).ok).toBe(true);
    nowMs += 1;
    expect(t.check(follower())).toEqual({
      ok: false,
      reason: 'no word from the leader r2 for 2001 ms: cut off, or the cell has no majority',
    });
    // A leader's own readiness does not depend on hearing anyone.
    expect(t.check(follower({ leader: 'r1', isLeader: true })).ok).toBe(true);
    t.observe(msg(MessageType.Heartbeat, 'r2', 3, { commit: LogIndex(10) }));
    expect(t.check(follower()).ok).toBe(true);
  });

  it('is never ready stopped, outside the membership, or with no leader', () => {
    const t = new CatchUpTracker(() => nowMs, SILENT_MS_MAX);
    t.observe(append('r2', 3, 10));
    expect(t.check(follower({ stopped: true }))).toEqual({ ok: false, reason: 'the replica has stopped' });
    expect(t.check(follower({ isMember: false }))).toEqual({ ok: false, reason: 'not (yet) a member of the cell' });
    expect(t.check(follower({ leader: null })).ok).toBe(false);
  });
});

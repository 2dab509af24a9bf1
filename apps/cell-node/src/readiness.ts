/**
 * A cell node's readiness: it serves calls only usefully once it follows a
 * leader and has applied what that leader had committed. A follower's own
 * commit index cannot tell: it is at most what it holds, so a replica far
 * behind looks caught up by it. What the leader says is the mark: its commit
 * index in AppendEntries, the snapshot's index (at or below its commit) in
 * InstallSnapshot, and min(match, commit) in a Heartbeat. The heartbeat's is
 * only a lower bound, but a leader that knows a follower lacks entries also
 * sends it AppendEntries (libs/raft, on every HeartbeatResponse), which raise
 * the mark; and a quiet cell sends only heartbeats, whose value is then the
 * full commit index (match is the leader's last index). The tracker keeps the
 * highest mark from the leader of the current term (0 is no mark: any cell
 * with a leader has committed that leader's blank entry), and the node is
 * ready when its applied index is within READY_LAG_ENTRIES_MAX of it, and it
 * heard that leader within `leaderSilentMsMax` (a follower cut off from its
 * leader keeps naming it: a pre-vote campaign does not forget the leader, so
 * the name alone would keep a replica of a cell without a majority ready).
 * A leader is ready once it has applied its own commit index within that lag.
 */
import { MessageType, type Message } from '@fencer/raft';
import type { ProbeResult } from '@fencer/service';

/** How many committed entries a replica may still have to apply and count as caught up (a few batches' worth). */
export const READY_LAG_ENTRIES_MAX = 1_000;

/** What the tracker reads from the replica at probe time. */
export interface ReplicaView {
  readonly stopped: boolean;
  readonly leader: string | null;
  readonly isLeader: boolean;
  readonly term: number;
  readonly commit: number;
  readonly applied: number;
  readonly isMember: boolean;
}

export class CatchUpTracker {
  private markTerm = -1;
  private markFrom: string | null = null;
  private mark = 0;
  private heardAtMs = Number.NEGATIVE_INFINITY;

  /**
   * @param nowMs monotonic milliseconds (the probe reads time; the replica never does).
   * @param leaderSilentMsMax how long a follower may not hear its leader and still count as following it.
   */
  constructor(
    private readonly nowMs: () => number,
    private readonly leaderSilentMsMax: number,
  ) {}

  /** Every Raft message the node takes from a peer, before the replica steps it. */
  observe(m: Message): void {
    const said = leaderMark(m);
    if (said === undefined || said === 0) return;
    this.heardAtMs = this.nowMs();
    // A new term or another sender starts the mark over: an old leader's commit says nothing of the new one's.
    if (m.term !== this.markTerm || m.from !== this.markFrom) {
      this.markTerm = m.term;
      this.markFrom = m.from;
      this.mark = said;
      return;
    }
    this.mark = Math.max(this.mark, said);
  }

  /** Ready, or the reason it is not. */
  check(r: ReplicaView): ProbeResult {
    if (r.stopped) return { ok: false, reason: 'the replica has stopped' };
    if (!r.isMember) return { ok: false, reason: 'not (yet) a member of the cell' };
    if (r.leader === null) return { ok: false, reason: 'no leader known: an election is under way or the cell has no majority' };
    const goal = r.isLeader ? r.commit : this.markOf(r);
    if (goal === undefined) return { ok: false, reason: `following ${r.leader} but has not heard its commit index yet` };
    const silentMs = this.nowMs() - this.heardAtMs;
    if (!r.isLeader && silentMs > this.leaderSilentMsMax)
      return {
        ok: false,
        reason: `no word from the leader ${r.leader} for ${Math.round(silentMs)} ms: cut off, or the cell has no majority`,
      };
    const behind = goal - r.applied;
    if (behind > READY_LAG_ENTRIES_MAX)
      return { ok: false, reason: `catching up: applied ${r.applied}, the leader had committed ${goal} (${behind} behind)` };
    return { ok: true };
  }

  private markOf(r: ReplicaView): number | undefined {
    return this.markTerm === r.term && this.markFrom === r.leader ? this.mark : undefined;
  }
}

/** The leader's commit as this message states it, or undefined for a message that states none. */
function leaderMark(m: Message): number | undefined {
  if (m.type === MessageType.AppendEntries || m.type === MessageType.Heartbeat) return m.commit;
  if (m.type === MessageType.InstallSnapshot) return m.snapshotMeta?.index;
  return undefined;
}

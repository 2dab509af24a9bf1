/**
 * The fast failover path under chaos (docs/decisions/0021): a follower whose
 * peer connection to its leader closes or resets starts a pre-vote at once.
 * That must never depose a live leader: its other followers still hear from
 * it and refuse the pre-vote. The `leader-link-reset` fault resets every
 * connection between a follower and a live leader of a calm cell (every
 * answering replica names that leader in that term), no process dying, and
 * watches the cell for LEADER_RESET_WATCH_MS: a new term in that window is a
 * leader disruption (the `leader disrupted` checker). With the planted bug
 * campaignWithoutPreVoteOnConnectionLoss the follower campaigns at term + 1
 * instead, and the live leader steps down when it hears that term.
 *
 * The kill nemesis measures the other side of the same path: the time from
 * kill -9 of a leader to a new leader among the rest (`failoverMs`), which
 * the connection-loss pre-vote brings under the election timeout.
 */
import type { ChaosCell } from './cell.js';
import type { Started } from './one-sided.js';

/** How long after a reset a new term counts as its doing (the simulator's disruption window, decision 0021). */
export const LEADER_RESET_WATCH_MS = 3_000;
/** How long the failover after a leader's kill is watched for before it is recorded as not seen. */
export const FAILOVER_WATCH_MS = 10_000;
const FAILOVER_POLL_MS = 50;

async function calmLeader(cell: ChaosCell): Promise<{ id: string; term: number } | string> {
  const st = [...(await cell.statuses(1_000)).values()];
  const lead = st.filter((s) => s.role === 'leader').sort((a, b) => b.term - a.term)[0];
  if (lead === undefined) return 'no leader';
  if (st.length < cell.ids.length) return 'not every replica answers';
  if (st.some((s) => s.term !== lead.term || s.leaderId !== lead.nodeId))
    return 'the cell is not calm (replicas disagree on the term or leader)';
  return { id: lead.nodeId, term: lead.term };
}

/** Resets a follower's connections to and from a calm cell's live leader; the heal judges whether the leader kept its term. */
export async function leaderLinkReset(
  cell: ChaosCell,
  pick: (ids: string[]) => string,
  disrupted: (why: string) => void,
): Promise<Started | string> {
  const lead = await calmLeader(cell);
  if (typeof lead === 'string') return lead;
  const followers = cell.ids.filter((id) => id !== lead.id && cell.state.get(id) === 'up');
  if (followers.length === 0) return 'no follower up';
  const f = pick(followers);
  cell.link({ from: f, to: lead.id }).resetAll();
  cell.link({ from: lead.id, to: f }).resetAll();
  return {
    detail: `reset every connection between follower ${f} and leader ${lead.id} (term ${lead.term}); watched ${LEADER_RESET_WATCH_MS} ms`,
    durationMs: LEADER_RESET_WATCH_MS,
    heal: async () => {
      // Judged only if nothing else hit the cell meanwhile: a replica killed or paused in the window explains a new term.
      const down = cell.ids.filter((id) => cell.state.get(id) !== 'up');
      if (down.length > 0) return `not judged: ${down.join(', ')} went down within the window`;
      const st = [...(await cell.statuses(1_000)).values()];
      const moved = st.filter((s) => s.term !== lead.term);
      if (moved.length === 0) return `leader ${lead.id} kept term ${lead.term}`;
      const why = `a connection reset between follower ${f} and live leader ${lead.id} (term ${lead.term}) was followed within ${LEADER_RESET_WATCH_MS} ms by term ${Math.max(...moved.map((s) => s.term))} (${moved.map((s) => `${s.nodeId} ${s.role}`).join(', ')})`;
      disrupted(why);
      return `DISRUPTED: ${why}`;
    },
  };
}

/** Milliseconds from now until a replica other than `killed` leads at a higher term, or undefined if none within FAILOVER_WATCH_MS. */
export async function timeFailover(cell: ChaosCell, killed: string, termBefore: number): Promise<number | undefined> {
  const started = performance.now();
  while (performance.now() - started < FAILOVER_WATCH_MS) {
    const st = await cell.statuses(300);
    for (const s of st.values())
      if (s.role === 'leader' && s.nodeId !== killed && s.term > termBefore) return Math.round(performance.now() - started);
    await new Promise((r) => setTimeout(r, FAILOVER_POLL_MS));
  }
  return undefined;
}

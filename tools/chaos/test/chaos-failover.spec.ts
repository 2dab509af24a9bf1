/**
 * Goal: the transport's fast failover path (issue 33, decision 0021) under
 * chaos. A follower whose connection to its leader resets starts a pre-vote
 * at once; that never deposes a live leader, whose other followers still
 * hear from it. A planted follower that campaigns without the pre-vote on
 * connection loss (Raft's bug switch campaignWithoutPreVoteOnConnectionLoss,
 * planted in every replica by support/chaos-node.mjs) deposes it, and the
 * `leader disrupted` checker flags it; the same run without the bug passes
 * every checker.
 * Method: runChaos on the five-replica cell with three scheduled
 * leader-link-reset faults (tools/chaos/src/leader-link.ts): every
 * connection between a follower and the leader of a calm cell is reset (no
 * process dies), and a new term within 3 s is a disruption. The kill
 * nemesis itself runs with the fast path on in chaos-run-a and -b (their
 * reports give each failover's time); here the schedule holds resets only,
 * so that nothing else explains a new term.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type ChaosOptions, runChaos, summarize } from '../src/run.js';
import type { ScheduledFault } from '../src/nemesis.js';
import { chaosSeed } from './support/chaos-run.js';

const RESETS: ScheduledFault[] = [4_000, 10_000, 16_000].map((atMs) => ({ atMs, kind: 'leader-link-reset' }));

function options(offset: number): ChaosOptions {
  return { seconds: 22, seed: chaosSeed(offset), schedule: RESETS, log: (l) => console.log(l) };
}

describe('the fast failover path under chaos', () => {
  it("with campaignWithoutPreVoteOnConnectionLoss planted, a reset of a live leader's link is flagged (leader disrupted)", async () => {
    const r = await runChaos({ ...options(41), bug: 'campaignWithoutPreVoteOnConnectionLoss' });
    console.log(summarize(r));
    expect(r.figures.connectionLossPreVote).toBe(false);
    expect(r.violations['leader disrupted']?.length ?? 0, `not caught; rerun: ${r.rerun}`).toBeGreaterThan(0);
    rmSync(r.workDir, { recursive: true, force: true });
  }, 300_000);

  it('with the connection-loss pre-vote on (the default), the leader keeps its term and every checker passes', async () => {
    const r = await runChaos(options(42));
    console.log(summarize(r));
    expect(r.figures.connectionLossPreVote).toBe(true);
    expect(r.violations, `rerun: ${r.rerun}`).toEqual({});
    const judged = r.faults.filter((f) => f.kind === 'leader-link-reset' && f.phase === 'heal' && f.detail.includes('kept term'));
    expect(judged.length, 'a reset was judged in a calm cell').toBeGreaterThanOrEqual(1);
    expect(r.figures.lockServiceOps, 'the run did work').toBeGreaterThan(100);
    rmSync(r.workDir, { recursive: true, force: true });
  }, 300_000);
});

/**
 * Goal: the chaos checkers catch live bugs in the cell, end to end, and
 * blame the right checker; the same seed with the bug off passes.
 * - readWithoutBarrier (every replica answers GetLock/CheckToken/ListLocks
 *   from its own applied state): lagging followers answer stale reads, which
 *   the tokens checker (a read's revision below a grant that completed
 *   before it was invoked) and the per-lock linearizability checker flag.
 * - grantBeforeCommit (the leader answers GRANTED as soon as it appends the
 *   Acquire): grants whose entries a new leader overwrote, or that were
 *   queued behind another request in the same batch, are not in the final
 *   committed log at their token; the grants-in-log checker flags them.
 * - heartbeatWithoutConfirmation (a leader extends leases without a
 *   confirmation round): a leader whose clock runs at x0.25, cut from its
 *   peers but not from clients, goes on acknowledging heartbeats long after
 *   the majority elected a successor, which expires those sessions a full
 *   TTL after its election: the early-expiry checker (the Expiry promise,
 *   by the fastest leader clock, less the allowed drift) flags them.
 * Method: runChaos with the bug planted in every replica (tools/chaos's own
 * entry point, support/chaos-node.mjs; cell-node's main cannot plant one),
 * 20-60 s of a nemesis chosen to expose it (followers paused, delayed and
 * partitioned so they lag; leaders killed and partitioned so appended
 * entries are lost; the slow isolated leader); then the same options and seed without the bug, which
 * must show no violation. Seeds are fixed (FENCER_CHAOS_SEED shifts them).
 * A failure prints the summary with the rerun command.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ChaosBug } from '../src/cell.js';
import { type ChaosOptions, runChaos, summarize } from '../src/run.js';

function seed(base: number): number {
  const fixed = process.env.FENCER_CHAOS_SEED;
  return fixed !== undefined && fixed !== '' ? Number(fixed) + base : base;
}

const CASES: ReadonlyArray<{ bug: ChaosBug; catchers: readonly string[]; options: ChaosOptions }> = [
  {
    bug: 'readWithoutBarrier',
    catchers: ['tokens', 'linearizability'],
    options: { seconds: 20, seed: seed(12), weights: { 'link-delay': 3, 'pause-followers': 3, partition: 2, 'kill-follower': 1 } },
  },
  {
    bug: 'grantBeforeCommit',
    catchers: ['grants in log'],
    options: { seconds: 20, seed: seed(11), weights: { 'kill-leader': 3, partition: 3, 'pause-leader': 2, 'link-delay': 1 } },
  },
  {
    bug: 'heartbeatWithoutConfirmation',
    catchers: ['expiry'],
    options: { seconds: 60, seed: seed(14), weights: { 'slow-leader-isolated': 1 } },
  },
];

describe('planted cell bugs, caught by the chaos checkers', () => {
  for (const c of CASES) {
    it(`${c.bug}: caught by ${c.catchers.join(' or ')}; the same seed with the bug off passes`, async () => {
      const caught = await runChaos({ ...c.options, bug: c.bug, log: (l) => console.log(l) });
      console.log(summarize(caught));
      expect(caught.ok, `${c.bug} was not caught; rerun: ${caught.rerun}`).toBe(false);
      expect(
        c.catchers.some((k) => (caught.violations[k]?.length ?? 0) > 0),
        `no violation from ${c.catchers.join('/')}: ${Object.keys(caught.violations).join(', ')}`,
      ).toBe(true);
      // Only checkers that judge client-visible answers: the bug never crashes a replica or corrupts the log.
      expect(
        Object.keys(caught.violations).filter(
          (k) => !['tokens', 'linearizability', 'grants in log', 'resource', 'watch', 'expiry'].includes(k),
        ),
      ).toEqual([]);
      rmSync(caught.workDir, { recursive: true, force: true });

      const clean = await runChaos({ ...c.options, log: (l) => console.log(l) });
      console.log(summarize(clean));
      expect(clean.checkerTimedOut).toBe(false);
      expect(clean.violations, `bug off, seed ${clean.seed}; rerun: ${clean.rerun}`).toEqual({});
      expect(clean.figures.lockServiceOps, 'the bug-off run did work').toBeGreaterThan(100);
      rmSync(clean.workDir, { recursive: true, force: true });
    }, 300_000);
  }
});

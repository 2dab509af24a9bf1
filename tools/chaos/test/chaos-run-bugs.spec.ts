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
 * - heartbeatWithoutConfirmation (a leader answers heartbeats with a TTL
 *   without first confirming it still leads): the slow isolated leader (a
 *   replica at clock rate x0.25 made leader, then cut from its peers, with
 *   one client on its side of the partition and the others on the
 *   majority's) goes on acknowledging that client's heartbeats while the
 *   new leader expires its sessions, and the majority's clients receive
 *   grants committed after those ExpireSession entries, or of the locks
 *   the sessions held, before the acknowledged heartbeats' promise (send
 *   time + ttl_ms_remaining, less the allowed drift) ran out; the expiry
 *   checker (check/expiry-promise.ts) flags them. The cut-off client itself
 *   never learns of the expiry in time, so the early-expiry judgement of
 *   client-observed ends has nothing to judge.
 * Method: runChaos with the bug planted in every replica (tools/chaos's own
 * entry point, support/chaos-node.mjs; cell-node's main cannot plant one),
 * 20-60 s of a nemesis chosen to expose it (followers paused, delayed and
 * partitioned so they lag; leaders killed and partitioned so appended
 * entries are lost; the slow isolated leader with a client on its side);
 * then the same options and seed without the bug, which must show no
 * violation. Seeds are fixed (FENCER_CHAOS_SEED shifts them). Processes on
 * a shared machine do not replay a seed exactly: a bug whose window depends
 * on timing (the slow leader must start, which takes a replica at x0.25
 * tens of seconds on a loaded machine, win a transfer, then be cut off
 * while its client still heartbeats to it) gets up to ATTEMPTS_MAX
 * consecutive seeds to be caught, and the catching seed is the one rerun.
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

/**
 * Consecutive seeds a planted bug may take to show itself. Three were not
 * always enough under CI's load: readWithoutBarrier passed seeds 12, 13 and
 * 14 in one run of the tenth session (caught within three in the others).
 */
const ATTEMPTS_MAX = 5;

/** Time one run may take beyond its nemesis (start, stop, convergence, reading the logs, checkers) on a loaded machine. */
const RUN_OVERHEAD_MS = 150_000;

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
    // The fault starts early: its replica at x0.25 may take half the run to start and win the transfer.
    options: { seconds: 60, seed: seed(13), weights: { 'slow-leader-isolated': 1 }, nemesisIntervalMs: [1_000, 2_000] },
  },
];

describe('planted cell bugs, caught by the chaos checkers', () => {
  for (const c of CASES) {
    it(
      `${c.bug}: caught by ${c.catchers.join(' or ')}; the same seed with the bug off passes`,
      async () => {
        let caught = await runChaos({ ...c.options, bug: c.bug, log: (l) => console.log(l) });
        console.log(summarize(caught));
        for (let attempt = 1; caught.ok && attempt < ATTEMPTS_MAX; attempt++) {
          rmSync(caught.workDir, { recursive: true, force: true });
          caught = await runChaos({ ...c.options, seed: c.options.seed + attempt, bug: c.bug, log: (l) => console.log(l) });
          console.log(summarize(caught));
        }
        expect(caught.ok, `${c.bug} was not caught in ${ATTEMPTS_MAX} seeds; rerun: ${caught.rerun}`).toBe(false);
        expect(
          c.catchers.some((k) => (caught.violations[k]?.length ?? 0) > 0),
          `no violation from ${c.catchers.join('/')}: ${Object.keys(caught.violations).join(', ')}`,
        ).toBe(true);
        // Only checkers that judge client-visible answers (a false grant also makes later calls on that lock fail
        // oddly, e.g. INVALID_MODE): the bug never crashes a replica or corrupts the log.
        expect(
          Object.keys(caught.violations).filter(
            (k) => !['tokens', 'linearizability', 'grants in log', 'resource', 'watch', 'expiry', 'odd failures'].includes(k),
          ),
        ).toEqual([]);
        rmSync(caught.workDir, { recursive: true, force: true });

        const clean = await runChaos({ ...c.options, seed: caught.seed, log: (l) => console.log(l) });
        console.log(summarize(clean));
        expect(clean.checkerTimedOut).toBe(false);
        expect(clean.violations, `bug off, seed ${clean.seed}; rerun: ${clean.rerun}`).toEqual({});
        expect(clean.figures.lockServiceOps, 'the bug-off run did work').toBeGreaterThan(100);
        rmSync(clean.workDir, { recursive: true, force: true });
      },
      (ATTEMPTS_MAX + 1) * (c.options.seconds * 1000 + RUN_OVERHEAD_MS),
    );
  }
});

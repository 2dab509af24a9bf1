/**
 * Goal: the chaos checkers catch live bugs in the cell, end to end, at the
 * first seed on any machine, and blame the right checker; the same run with
 * the bug off passes.
 * - readWithoutBarrier (every replica answers GetLock/CheckToken/ListLocks
 *   from its own applied state): a lagging follower answers a stale read,
 *   which the tokens checker (a read's revision below a grant that completed
 *   before it was invoked) and the per-lock linearizability checker flag.
 * - grantBeforeCommit (the leader answers GRANTED as soon as it appends the
 *   Acquire): an isolated leader's grant of an entry the new leader's log
 *   replaces is not in the final committed log at its token; the
 *   grants-in-log checker flags it.
 * - heartbeatWithoutConfirmation (a leader answers heartbeats with a TTL
 *   without first confirming it still leads): the isolated leader goes on
 *   acknowledging its one client's heartbeats after the new leader expired
 *   that client's sessions and the majority's clients were granted later
 *   entries, before the acknowledged heartbeats' promise (send time +
 *   ttl_ms_remaining, less the allowed drift) ran out; the expiry checker
 *   (check/expiry-promise.ts) flags it.
 * Method: runChaos with the bug planted in every replica (tools/chaos's own
 * entry point, support/chaos-node.mjs; cell-node's main cannot plant one)
 * and one fault scheduled, not drawn, 4 s into the run (one-sided.ts): a
 * follower whose incoming peer links are delayed 4 s, with one client that
 * reaches only it and reads back a lock it was just granted; or a leader
 * with a long election timeout (slow to notice it lost its quorum, with no
 * clock skew, so no faketime) cut from its peers, with one client on its
 * side whose probe session it heartbeats and whose Acquire of a free lock
 * it receives after the cut. The exposing answer then comes whatever the
 * machine's speed, so one seed is enough. Then the same options and seed
 * without the bug, which must show no violation (the two leader cases share
 * one schedule and seed, hence one bug-off run). Seeds are fixed
 * (FENCER_CHAOS_SEED shifts them). A failure prints the summary with the
 * rerun command.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ChaosBug } from '../src/cell.js';
import type { FaultKind } from '../src/nemesis.js';
import { type ChaosOptions, type ChaosReport, runChaos, summarize } from '../src/run.js';

function seed(base: number): number {
  const fixed = process.env.FENCER_CHAOS_SEED;
  return fixed !== undefined && fixed !== '' ? Number(fixed) + base : base;
}

/**
 * Time one run may take beyond its `seconds` on a loaded machine: the
 * scheduled fault running past them (its start and duration are bounded,
 * one-sided.ts), then stopping, convergence, reading the logs, checkers.
 */
const RUN_OVERHEAD_MS = 200_000;

/** When the directed fault starts: the workload has opened its sessions and is busy. */
const FAULT_AT_MS = 4_000;

/** The slow leader's fault takes a restart, a transfer, 1.5 s to settle, then a TTL plus 8-12 s cut off (the run waits for its heal). */
const SLOW_LEADER_SECONDS = 30;

const CASES: ReadonlyArray<{ bug: ChaosBug; fault: FaultKind; catchers: readonly string[]; options: ChaosOptions }> = [
  {
    bug: 'readWithoutBarrier',
    fault: 'lagging-follower',
    catchers: ['tokens', 'linearizability'],
    options: { seconds: 20, seed: seed(12), schedule: [{ atMs: FAULT_AT_MS, kind: 'lagging-follower' }] },
  },
  {
    bug: 'grantBeforeCommit',
    fault: 'slow-leader-isolated',
    catchers: ['grants in log'],
    options: { seconds: SLOW_LEADER_SECONDS, seed: seed(13), schedule: [{ atMs: FAULT_AT_MS, kind: 'slow-leader-isolated' }] },
  },
  {
    bug: 'heartbeatWithoutConfirmation',
    fault: 'slow-leader-isolated',
    catchers: ['expiry'],
    options: { seconds: SLOW_LEADER_SECONDS, seed: seed(13), schedule: [{ atMs: FAULT_AT_MS, kind: 'slow-leader-isolated' }] },
  },
];

/** Checkers that judge client-visible answers: a planted bug never crashes a replica or corrupts the log. */
const CLIENT_VISIBLE = ['tokens', 'linearizability', 'grants in log', 'resource', 'watch', 'expiry', 'odd failures'];

/** Bug-off runs by their options (the cases that share a schedule and seed share one). */
const cleanRuns = new Map<string, Promise<ChaosReport>>();

function cleanRun(options: ChaosOptions): Promise<ChaosReport> {
  const key = JSON.stringify(options);
  let run = cleanRuns.get(key);
  if (run === undefined) {
    run = runChaos({ ...options, log: (l) => console.log(l) }).then((r) => {
      console.log(summarize(r));
      rmSync(r.workDir, { recursive: true, force: true });
      return r;
    });
    cleanRuns.set(key, run);
  }
  return run;
}

function expectFaultStarted(r: ChaosReport, fault: FaultKind): void {
  const started = r.faults.filter((f) => f.kind === fault && f.phase !== 'heal');
  expect(
    started.map((f) => f.phase),
    `the scheduled ${fault} started: ${JSON.stringify(started)}`,
  ).toEqual(['start']);
}

describe('planted cell bugs, caught by the chaos checkers at the first seed', () => {
  for (const c of CASES) {
    it(
      `${c.bug}: caught by ${c.catchers.join(' or ')} under a scheduled ${c.fault}; the same run with the bug off passes`,
      async () => {
        const caught = await runChaos({ ...c.options, bug: c.bug, log: (l) => console.log(l) });
        console.log(summarize(caught));
        expectFaultStarted(caught, c.fault);
        expect(caught.ok, `${c.bug} was not caught at seed ${caught.seed}; rerun: ${caught.rerun}`).toBe(false);
        expect(
          c.catchers.some((k) => (caught.violations[k]?.length ?? 0) > 0),
          `no violation from ${c.catchers.join('/')}: ${Object.keys(caught.violations).join(', ')}`,
        ).toBe(true);
        expect(Object.keys(caught.violations).filter((k) => !CLIENT_VISIBLE.includes(k))).toEqual([]);
        rmSync(caught.workDir, { recursive: true, force: true });

        const clean = await cleanRun(c.options);
        expectFaultStarted(clean, c.fault);
        expect(clean.checkerTimedOut).toBe(false);
        expect(clean.violations, `bug off, seed ${clean.seed}; rerun: ${clean.rerun}`).toEqual({});
        expect(clean.figures.lockServiceOps, 'the bug-off run did work').toBeGreaterThan(100);
      },
      2 * (c.options.seconds * 1000 + RUN_OVERHEAD_MS),
    );
  }
});

/**
 * Goal: every promise holds across live tenant moves under faults (issue 27,
 * docs/decisions/0019-the-move-worker.md). Two tenants move back and forth
 * between two cells for 120 s while the nemesis kills (-9), pauses
 * (SIGSTOP) and cuts off members of the source cell, the target cell and
 * the meta group, their leaders half the time; the lock-history checkers
 * (linearizability against the FIFO lock model, tokens, the fenced
 * resource, early expiry, heartbeat promises) find nothing, every move
 * ends done or failed-and-rolled-back, and every tenant is routed active
 * where its last move left it.
 * Method: runMovesChaos (tools/chaos/src/moves-run.ts): real processes on
 * 127.0.0.1, two managed cells of three replicas, three control-plane
 * instances, a router and a session proxy, four client workers and a fenced
 * resource; a fresh seed each run (printed; FENCER_CHAOS_SEED fixes it).
 * The floors are low enough for a loaded two-core machine and high enough
 * that a run that did nothing cannot pass.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runMovesChaos, summarizeMoves } from '../src/moves-run.js';
import { chaosSeed } from './support/chaos-run.js';

const MOVES_FLOORS = {
  lockServiceOps: 500,
  movesEnded: 2,
  movesDone: 1,
  faults: 10,
  fencedWrites: 20,
} as const;

describe('chaos, moves mode', () => {
  it('120 s of moves under kill -9, pauses and partitions of the source, the target and the meta group: no violation', async () => {
    const report = await runMovesChaos({ seconds: 120, seed: chaosSeed(31), log: (l) => console.log(l) });
    console.log(summarizeMoves(report));
    const f = report.figures;
    expect(report.checkerTimedOut, 'a checker timed out').toBe(false);
    expect(report.violations, `violations; rerun: ${report.rerun}; work dir ${report.workDir}`).toEqual({});
    expect(f.lockServiceOps, 'lock-service operations').toBeGreaterThanOrEqual(MOVES_FLOORS.lockServiceOps);
    expect(f.movesDone + f.movesFailed, 'moves ended').toBeGreaterThanOrEqual(MOVES_FLOORS.movesEnded);
    expect(f.movesDone, 'moves done').toBeGreaterThanOrEqual(MOVES_FLOORS.movesDone);
    expect(f.faultsStarted, 'faults injected').toBeGreaterThanOrEqual(MOVES_FLOORS.faults);
    expect(f.fencedWrites, 'fenced writes').toBeGreaterThanOrEqual(MOVES_FLOORS.fencedWrites);
    const roles = new Set(report.faults.filter((x) => x.phase === 'start').map((x) => x.role));
    for (const role of ['source', 'target', 'meta'] as const) expect(roles.has(role), `a fault hit the ${role}`).toBe(true);
    rmSync(report.workDir, { recursive: true, force: true });
  }, 480_000);
});

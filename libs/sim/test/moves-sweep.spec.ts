/**
 * Goal: tenant moves keep the lock service's promises across cells. Under
 * crashes of either cell's replicas and of the meta group's members, and
 * message loss, a namespace moved back and forth between two cells keeps
 * its tokens growing per lock, keeps every acknowledged grant and every
 * queue's order, never has its route switched ahead of its import, expires
 * no session within an acknowledged lease and every dead client's session
 * in time, and ends owned by the cell its route names with every move
 * finished. And the
 * checkers catch both planted move bugs within 200 seeds.
 * Method: runMovesSimulation (two production LockCells of three replicas and
 * the production MetaGroup, the move worker's pure nextMoveStep driving the
 * moves), one deterministic run per seed: seeds 1-MOVES_SWEEP_SEEDS (default
 * 20) clean; the same seed twice gives the same trace; each planted bug
 * fires its checker on some seed of 1-200 (the first such seed is tried
 * first, so the test stops early), and that very seed is clean with the bug
 * off.
 */
import { describe, expect, it } from 'vitest';
import { type MoveBug, type MoveCheckerName, type MovesSimOptions, movesReplayCommand, runMovesSimulation } from '../src/index.js';
import { seedRange } from './sweep.js';

const SWEEP_SEEDS = Number(process.env['MOVES_SWEEP_SEEDS'] ?? 20);
/** The bug tests' seeds: the bar of issue 27 ("caught within 200 seeds"). */
const BUG_SEEDS = 200;

function describeViolations(report: ReturnType<typeof runMovesSimulation>, options: MovesSimOptions): string {
  const detail = report.violations
    .slice(0, 3)
    .map((v) => `${v.checker}: ${v.detail}`)
    .join('\n  ');
  return `seed ${options.seed}; replay: ${movesReplayCommand(options)}\n  ${detail}`;
}

describe(`moves sweep, seeds 1-${SWEEP_SEEDS}`, () => {
  it.each(seedRange(1, SWEEP_SEEDS))('seed %i: no violation', (seed) => {
    const options = { seed };
    const report = runMovesSimulation(options);
    expect(report.violations.length, describeViolations(report, options)).toBe(0);
    // The run really ran: members crashed, moves switched and finished, grants were acknowledged on both sides.
    expect(report.stats.crashes).toBeGreaterThan(0);
    expect(report.stats.movesDone).toBeGreaterThan(0);
    expect(report.stats.switches).toBeGreaterThanOrEqual(report.stats.movesDone);
    expect(report.stats.grantsAcked).toBeGreaterThan(0);
  });

  it('is deterministic: one seed twice gives one trace', () => {
    const a = runMovesSimulation({ seed: 7, runMs: 4_000, healMs: 6_000 });
    const b = runMovesSimulation({ seed: 7, runMs: 4_000, healMs: 6_000 });
    expect(a.traceHash).toBe(b.traceHash);
    expect(a.stats).toEqual(b.stats);
  });
});

const BUG_CHECKERS: Record<MoveBug, MoveCheckerName> = {
  importWithoutRevisionRaise: 'fencing-token',
  switchBeforeImport: 'route-ahead-of-import',
};

describe('moves sweep, planted bugs', () => {
  it.each(Object.entries(BUG_CHECKERS) as [MoveBug, MoveCheckerName][])(
    '%s fires %s on some seed of 1-200, and that seed is clean with the bug off',
    (bug, checker) => {
      let caught: number | undefined;
      for (const seed of seedRange(1, BUG_SEEDS)) {
        const report = runMovesSimulation({ seed, bug });
        if (report.fired.includes(checker)) {
          caught = seed;
          break;
        }
      }
      expect(caught, `${bug} was not caught within ${BUG_SEEDS} seeds`).toBeDefined();
      const clean = runMovesSimulation({ seed: caught as number });
      expect(clean.violations.length, describeViolations(clean, { seed: caught as number })).toBe(0);
    },
  );
});

/**
 * Goal: the moves mode's checkers are not vacuous (issue 27's negative
 * control). With every cell node importing a moved namespace without
 * raising its revision base (libs/cell's test hook
 * importWithoutRevisionRaise, planted through support/chaos-node.mjs), a
 * tenant that moves from the busier cell to the quieter one is granted
 * tokens below those it was granted before: the tokens checker flags it.
 * Method: runMovesChaos with the bug and no faults (moves only, so the
 * catch depends on nothing but the moves), 40 s. The tenants that move
 * start on cell-1 beside a third tenant, while cell-2 serves one: cell-1's
 * revisions run ahead, so the first move lands below them. The same mode
 * without the bug passes (chaos-moves.spec.ts, under faults as well).
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runMovesChaos, summarizeMoves } from '../src/moves-run.js';
import { chaosSeed } from './support/chaos-run.js';

describe('chaos, moves mode, negative control', () => {
  it('an import that skips the revision-base raise is flagged by the tokens checker', async () => {
    const report = await runMovesChaos({
      seconds: 40,
      seed: chaosSeed(32),
      faults: [],
      bug: 'importWithoutRevisionRaise',
      log: (l) => console.log(l),
    });
    console.log(summarizeMoves(report));
    expect(report.figures.movesDone, 'a move completed').toBeGreaterThanOrEqual(1);
    expect(report.ok, `the planted bug was not caught; rerun: ${report.rerun}`).toBe(false);
    expect(
      report.violations['tokens']?.length ?? 0,
      `tokens flagged nothing: ${Object.keys(report.violations).join(', ')}`,
    ).toBeGreaterThan(0);
    // Only what clients saw is judged wrong: no process crashed and every move ended where its route says.
    expect(report.violations['processes']).toBeUndefined();
    expect(report.violations['moves']).toBeUndefined();
    rmSync(report.workDir, { recursive: true, force: true });
  }, 300_000);
});

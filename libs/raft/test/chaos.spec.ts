/**
 * Goal: under randomized faults (crashes, partitions, a lossy, slow,
 * duplicating network, transfers, membership changes, snapshots, reads)
 * the core never breaks a safety property and converges once faults stop;
 * and the harness's checkers are proven to bite: each test-only bug switch
 * is caught within 200 seeds, by the recipe aimed at it, by the checker of
 * the very property that bug breaks (not by any error at all), and the
 * catching seed passes with the bug off, so the bug and nothing else is
 * what the checker saw.
 * Method: seeded runs of test/chaos.ts; a bug-switch run stops at the first
 * seed whose run throws, and that error must be a SafetyViolation naming
 * the expected property; the same seed then runs again without the bug.
 */
import { describe, expect, it } from 'vitest';
import type { RaftBug } from '../src/index.js';
import { runChaos, type Recipe } from './chaos.js';
import { SafetyViolation, type SafetyProperty } from './network.js';

function firstCaught(bug: RaftBug, recipe: Recipe, seedsMax: number): { seed: number; error: unknown } | undefined {
  for (let seed = 1; seed <= seedsMax; seed++) {
    try {
      runChaos(seed, { recipe, bugs: { [bug]: true } });
    } catch (error) {
      return { seed, error };
    }
  }
  return undefined;
}

describe('chaos', () => {
  it('general schedule: 25 seeds, every safety check holds and every run converges', () => {
    let commands = 0;
    for (let seed = 1; seed <= 25; seed++) commands += runChaos(seed, { recipe: 'general' }).commands;
    expect(commands).toBeGreaterThan(25 * 50);
  });

  it.each(['figure8', 'vote-restart', 'conf-split', 'stale'] as const)('recipe %s without bugs: 10 seeds, no violation', (recipe) => {
    for (let seed = 1; seed <= 10; seed++) runChaos(seed, { recipe });
  });

  it.each<[RaftBug, Recipe, SafetyProperty]>([
    // Figure 8: an old-term entry counted as committed is overwritten, so a later leader lacks it.
    ['commitPreviousTermByCounting', 'figure8', 'leader-completeness'],
    // A vote forgotten across a restart is cast twice: two leaders in one term.
    ['voteBeforePersist', 'vote-restart', 'election-safety'],
    // A new leader answers reads at a commit index older than what was already applied.
    ['readIndexBeforeBlankCommit', 'general', 'linearizable-read'],
    // Two changes in flight give disjoint majorities: one commits what the other's leader never saw.
    ['concurrentConfChange', 'conf-split', 'leader-completeness'],
    // A node obeys a deposed leader and votes in its stale term: two leaders in one term.
    ['acceptStaleTerm', 'stale', 'election-safety'],
  ])('bug %s is caught within 200 seeds by the %s recipe, by the %s checker, and that seed passes without it', (bug, recipe, property) => {
    const caught = firstCaught(bug, recipe, 200);
    expect(caught, `${bug} was never caught`).toBeDefined();
    const { seed, error } = caught as { seed: number; error: unknown };
    expect(error, `seed ${seed}: ${String(error)}`).toBeInstanceOf(SafetyViolation);
    expect((error as SafetyViolation).property, `seed ${seed}: ${String(error)}`).toBe(property);
    expect(() => runChaos(seed, { recipe }), `seed ${seed} with ${bug} off`).not.toThrow();
  });
});

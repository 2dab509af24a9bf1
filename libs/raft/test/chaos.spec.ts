/**
 * Goal: under randomized faults (crashes, partitions, a lossy, slow,
 * duplicating network, transfers, membership changes, snapshots, reads)
 * the core never breaks a safety property and converges once faults stop;
 * and the harness's checkers are proven able to fire: each test-only bug
 * switch is caught within 200 seeds by the fault recipe aimed at it.
 * Method: seeded runs of test/chaos.ts; a bug-switch run stops at the first
 * seed whose run throws a violation.
 */
import { describe, expect, it } from 'vitest';
import type { RaftBug } from '../src/index.js';
import { runChaos, type Recipe } from './chaos.js';

function firstCaught(bug: RaftBug, recipe: Recipe, seedsMax: number): { seed: number; message: string } | undefined {
  for (let seed = 1; seed <= seedsMax; seed++) {
    try {
      runChaos(seed, { recipe, bugs: { [bug]: true } });
    } catch (e) {
      return { seed, message: (e as Error).message };
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

  it.each([
    ['commitPreviousTermByCounting', 'figure8'],
    ['voteBeforePersist', 'vote-restart'],
    ['readIndexBeforeBlankCommit', 'general'],
    ['concurrentConfChange', 'conf-split'],
    ['acceptStaleTerm', 'stale'],
  ] as const)('bug %s is caught within 200 seeds by the %s recipe', (bug, recipe) => {
    const caught = firstCaught(bug, recipe, 200);
    expect(caught?.message).toMatch(/SAFETY|assert|commit|conflict/i);
  });
});

/**
 * Goal: the checkers are proven able to fire: each test-only bug switch,
 * which puts a known Raft bug back in, is caught by a safety checker within
 * 200 seeds.
 * Method: seeds of the bug's simulation profile (its fault mix tuned to give
 * the bug its chance; the checkers are the CI sweep's) until one reports a
 * safety violation. Assertion failures of the code under test do not count.
 * The other three switches are in bugs-1.spec.ts.
 */
import { describe, it } from 'vitest';
import { expectCaught, expectProfileClean } from './bugs.js';

const bugsHere = ['readIndexBeforeBlankCommit', 'concurrentConfChange', 'acceptStaleTerm'] as const;

describe('bug switches are caught', () => {
  it.each(bugsHere)('%s: a safety checker fires within 200 seeds', (bug) => expectCaught(bug));
  it.each(bugsHere)('%s: its profile with the bug off stays clean (5 seeds)', (bug) => expectProfileClean(bug, 5));
});

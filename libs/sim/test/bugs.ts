/**
 * Shared by the bug-switch test files: run seeds 1..200 of a bug's profile
 * until a safety checker fires (a disruption checker for a bug that only
 * disrupts), then rerun that seed with the bug off.
 */
import { expect } from 'vitest';
import { expectClean } from './sweep.js';
import type { ReplicaBug } from '@fencer/replica';
import { DISRUPTION_CHECKERS, SAFETY_CHECKERS, bugOptions, replayCommand, runSimulation } from '../src/index.js';

export const seedsMax = 200;

/** A bug that only disrupts (an election a live leader did not need) is caught by a disruption checker. */
const disruptionBugs: ReadonlySet<ReplicaBug> = new Set(['campaignWithoutPreVoteOnConnectionLoss']);

export function expectCaught(bug: ReplicaBug): void {
  const checkers = disruptionBugs.has(bug) ? DISRUPTION_CHECKERS : SAFETY_CHECKERS;
  for (let seed = 1; seed <= seedsMax; seed++) {
    const options = bugOptions(bug, seed);
    const report = runSimulation(options);
    const safety = report.violations.find((v) => checkers.includes(v.checker));
    if (safety) {
      console.log(
        `${bug}: caught at seed ${seed} by ${safety.checker}: ${safety.detail.split(' | ')[0]}\n  replay: ${replayCommand(options, bug)}`,
      );
      // The same seed and profile with the bug off is clean: what fired was the bug.
      expectClean({ ...options, bugs: {} }, undefined, bug);
      return;
    }
  }
  expect.fail(`${bug}: no ${checkers === SAFETY_CHECKERS ? 'safety' : 'disruption'} checker fired in ${seedsMax} seeds`);
}

/** The same profile with the bug off stays clean: what fires is the bug, not the profile. */
export function expectProfileClean(bug: ReplicaBug, seeds: number): void {
  for (let seed = 1; seed <= seeds; seed++) expectClean({ ...bugOptions(bug, seed), bugs: {} }, undefined, bug);
}

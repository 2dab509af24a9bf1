/**
 * Shared by the bug-switch test files: run seeds 1..200 of a bug's profile
 * until a safety checker fires, then rerun that seed with the bug off.
 */
import { expect } from 'vitest';
import { expectClean } from './sweep.js';
import type { ReplicaBug } from '@fencer/replica';
import { SAFETY_CHECKERS, bugOptions, replayCommand, runSimulation } from '../src/index.js';

export const seedsMax = 200;

export function expectCaught(bug: ReplicaBug): void {
  for (let seed = 1; seed <= seedsMax; seed++) {
    const options = bugOptions(bug, seed);
    const report = runSimulation(options);
    const safety = report.violations.find((v) => SAFETY_CHECKERS.includes(v.checker));
    if (safety) {
      console.log(
        `${bug}: caught at seed ${seed} by ${safety.checker}: ${safety.detail.split(' | ')[0]}\n  replay: ${replayCommand(options, bug)}`,
      );
      // The same seed and profile with the bug off is clean: what fired was the bug.
      expectClean({ ...options, bugs: {} }, undefined, bug);
      return;
    }
  }
  expect.fail(`${bug}: no safety checker fired in ${seedsMax} seeds`);
}

/** The same profile with the bug off stays clean: what fires is the bug, not the profile. */
export function expectProfileClean(bug: ReplicaBug, seeds: number): void {
  for (let seed = 1; seed <= seeds; seed++) expectClean({ ...bugOptions(bug, seed), bugs: {} }, undefined, bug);
}

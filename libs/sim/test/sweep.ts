/**
 * Shared by the sweep test files: run one seed of the CI sweep and fail with
 * the replay command and the first violations.
 */
import { expect } from 'vitest';
import { type RunReport, type SimOptions, replayCommand, runSimulation } from '../src/index.js';

export function expectClean(options: SimOptions, bug?: string, profile?: string): RunReport {
  const report = runSimulation(options);
  const detail = report.violations
    .slice(0, 3)
    .map((v) => `${v.checker} at ${(v.timeUs / 1e6).toFixed(3)} s: ${v.detail.split(' | ')[0]}`)
    .join('\n  ');
  expect(report.violationCount, `seed ${options.seed} failed; replay: ${replayCommand(options, bug, profile)}\n  ${detail}`).toBe(0);
  return report;
}

/** Seeds [from, to] of the sweep, for one test file each half (two workers). */
export function seedRange(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

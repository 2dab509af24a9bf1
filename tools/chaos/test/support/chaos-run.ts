/**
 * Shared by the CI chaos runs: the floors a run must reach (so that it cannot
 * pass by doing nothing), the seed (fresh each run unless FENCER_CHAOS_SEED
 * fixes it), and the assertions on a report.
 */
import { rmSync } from 'node:fs';
import { expect } from 'vitest';
import { type ChaosReport, summarize } from '../../src/run.js';

export const FLOORS = {
  /** Lock-service operations (the fenced resource's reads and writes not counted). */
  lockServiceOps: 5_000,
  leaderChanges: 1,
  sessionExpiries: 10,
  fencedWrites: 100,
} as const;

export function chaosSeed(offset: number): number {
  const fixed = process.env.FENCER_CHAOS_SEED;
  if (fixed !== undefined && fixed !== '') return Number(fixed) + offset;
  return (Date.now() % 1_000_000_000) + offset;
}

/** Leader changes: what the admin API showed, or the terms that wrote entries, whichever saw more. */
export function leaderChanges(r: ChaosReport): number {
  return Math.max(r.figures.leaderChangesSeen, r.figures.termsInLog - 1);
}

/** Expiries: ExpireSession entries in the replayed log, or (when the log was compacted) those clients saw, whichever is more. */
export function sessionExpiries(r: ChaosReport): number {
  return Math.max(r.figures.expiriesInLog, r.figures.expiriesSeenByClients);
}

/** Zero violations, no checker timeout, every floor reached; the data is deleted when all holds. */
export function expectCleanRun(r: ChaosReport): void {
  console.log(summarize(r));
  expect(r.checkerTimedOut, 'a checker timed out').toBe(false);
  expect(r.violations, `violations; rerun: ${r.rerun}; history ${r.historyDir}; faults ${r.scheduleFile}`).toEqual({});
  expect(r.figures.lockServiceOps, 'lock-service operations').toBeGreaterThanOrEqual(FLOORS.lockServiceOps);
  expect(leaderChanges(r), 'leader changes').toBeGreaterThanOrEqual(FLOORS.leaderChanges);
  expect(sessionExpiries(r), 'session expiries').toBeGreaterThanOrEqual(FLOORS.sessionExpiries);
  expect(r.figures.fencedWrites, 'fenced writes').toBeGreaterThanOrEqual(FLOORS.fencedWrites);
  rmSync(r.workDir, { recursive: true, force: true });
}

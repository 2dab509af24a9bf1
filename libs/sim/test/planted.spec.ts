/**
 * Goal: each lock checker is proven able to fire in a whole run, not only
 * on a hand-built history: a planted lock-level bug is caught by the one
 * checker meant for it, and the same runs without the bug stay clean.
 * Method: seeds of the CI sweep's options (all faults, 40 s) with one
 * planted bug (a state machine that reuses tokens, one that grants a busy
 * lock, a read answered from the most lagging replica, a leader that
 * extends leases without confirming it leads, and the cell's own chaos
 * switches: reads without the read barrier, a grant answered before it
 * commits) until a safety checker fires;
 * it must be the expected one, and the same seed without the bug is clean.
 */
import { describe, expect, it } from 'vitest';
import { type CheckerName, type PlantedBug, SAFETY_CHECKERS, replayCommand, runSimulation, sweepOptions } from '../src/index.js';
import { expectClean } from './sweep.js';

/**
 * Other checkers a bug may trip first. A reused token also makes its
 * holder's Release a no-op (the state machine holds the real token), so the
 * hold never ends, which lock-exclusion sees when the next grant is
 * acknowledged.
 */
const alsoFirst: Partial<Record<PlantedBug, readonly CheckerName[]>> = { reuseToken: ['lock-exclusion'] };

const cases: readonly (readonly [PlantedBug, CheckerName, number])[] = [
  ['reuseToken', 'fencing-token', 20],
  ['doubleGrant', 'lock-exclusion', 20],
  ['staleLockRead', 'stale-read', 20],
  // A deposed leader that acknowledges heartbeats without confirming it leads: the lease the client
  // is told of outlives the session on the new leader.
  ['heartbeatWithoutConfirmation', 'early-expiry', 200],
  // The cell's own switches, the ones chaos plants in real processes: a follower answers a read from its
  // applied state (behind the leader's grants); a grant answered before its entry commits, and so possibly
  // never applied at that token (fencing-token checks every acknowledged grant against the applied ones).
  ['readWithoutBarrier', 'stale-read', 100],
  ['grantBeforeCommit', 'fencing-token', 100],
];

describe('planted lock bugs are caught by their checker', () => {
  it.each(cases)('%s: %s fires within %i seeds, and the catching seed is clean without the bug', (planted, checker, seedsMax) => {
    for (let seed = 1; seed <= seedsMax; seed++) {
      const options = sweepOptions(seed, { seconds: 40, planted });
      const report = runSimulation(options);
      const first = report.violations.find((v) => SAFETY_CHECKERS.includes(v.checker));
      if (first === undefined) continue;
      if (first.checker !== checker) {
        expect(alsoFirst[planted] ?? [], `${replayCommand(options)}: ${first.detail}`).toContain(first.checker);
        continue;
      }
      console.log(`${planted}: caught at seed ${seed} by ${checker}: ${first.detail.split(' | ')[0]}\n  replay: ${replayCommand(options)}`);
      expectClean({ ...options, planted: null });
      return;
    }
    expect.fail(`${planted}: no safety checker fired in ${seedsMax} seeds`);
  });

  it('the same runs without a planted bug stay clean (3 seeds), and exercise what the checkers watch', () => {
    const total = { grantsAcked: 0, expiries: 0, waitsTimedOut: 0, readsChecked: 0, clientDeaths: 0, heartbeatsAcked: 0 };
    for (let seed = 1; seed <= 3; seed++) {
      const { stats } = expectClean(sweepOptions(seed, { seconds: 40 }));
      for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += stats[k];
    }
    // Grants, reads, client deaths and the leader's expiries and wait timeouts all happened.
    for (const [k, v] of Object.entries(total)) expect(v, k).toBeGreaterThan(0);
  });
});

describe('the KV machine stays selectable', () => {
  it.each([1, 2, 3, 4, 5])('kv seed %i: no violation', (seed) => {
    const report = expectClean(sweepOptions(seed, { seconds: 60, machine: 'kv' }));
    expect(report.stats.writesAcked).toBeGreaterThan(0);
    expect(report.stats.grantsAcked).toBe(0);
  });
});

// Goal: the fleet-load suite's figures follow from what it sampled: CPU
// and RSS add up by component, a storm's peak rates come from its busiest
// bin, reopenings stop counting once every session has answered, and
// "back to steady" is the first bin after which no bin falls below the
// steady share of the offered rate (a dip later moves it).
// Method: the pure functions on hand-made samples.
import { describe, expect, it } from 'vitest';
import { componentTable, STEADY_SHARE, stormFigures } from '../src/suites/fleet-load-report.mjs';

const MiB = 2 ** 20;

describe('CPU and RSS by component', () => {
  it('adds each process to its component: cores over the window, RSS in all and the largest', () => {
    const comps = new Map([
      [1, 'cell leaders'],
      [2, 'cell followers'],
      [3, 'cell followers'],
      [4, 'proxies'],
    ]);
    const rows = componentTable({ 1: 4, 2: 1, 3: 1, 4: 2 }, { 1: 70 * MiB, 2: 60 * MiB, 3: 65 * MiB, 4: 80 * MiB }, comps, 10);
    expect(rows).toEqual([
      { component: 'cell leaders', processes: 1, cores: 0.4, rssMiB: 70, rssMaxMiB: 70 },
      { component: 'cell followers', processes: 2, cores: 0.2, rssMiB: 125, rssMaxMiB: 65 },
      { component: 'proxies', processes: 1, cores: 0.2, rssMiB: 80, rssMaxMiB: 80 },
    ]);
  });
});

/** Samples every 100 ms from a list of acknowledged heartbeats per 100 ms, the leaders busy `cores` throughout. */
function samples(perStep: number[], cores = 0.5) {
  let acked = 0;
  return [0, ...perStep].map((n, i) => {
    acked += n;
    return { t: i * 100, acked, leaderCpuS: (i * 100 * cores) / 1000 };
  });
}

describe('the reconnect storm', () => {
  // 1,000 sessions at 1,000/s: nothing for 1 s (proxies down), a burst of 1,000 at once, then the steady 100 per 100 ms.
  const steadyTail = Array.from({ length: 20 }, () => 100);
  const quiet = Array.from({ length: 10 }, () => 0);

  it('takes the peaks from the busiest bin and counts reopenings up to one per session', () => {
    const f = stormFigures(samples([...quiet, 600, 400, ...steadyTail]), { sessions: 1000, offeredPerS: 1000, binMs: 500 });
    expect(f.peakHbPerS).toBe((600 + 400 + 300) / 0.5);
    // Reopenings: the first 1,000 answers only, all in the bin from 1.0 to 1.5 s.
    expect(f.peakReopenPerS).toBe(1000 / 0.5);
    expect(f.peakLeaderCores).toBeCloseTo(0.5, 9);
    expect(f.steadyMs).toBe(1500);
  });

  it('moves "steady" past a later dip below the steady share, and has none when the rate never reaches it', () => {
    const dip = [...quiet, 1000, ...Array.from({ length: 10 }, () => 100), 10, 10, 10, 10, 10, ...Array.from({ length: 10 }, () => 100)];
    const f = stormFigures(samples(dip), { sessions: 1000, offeredPerS: 1000, binMs: 500 });
    // Bins end every 500 ms; the dip (10 per step from 2.2 to 2.6 s) drags the bins ending at 2.5 and 3.0 s below 95%.
    expect(f.steadyMs).toBe(3500);
    const never = stormFigures(samples([...quiet, 1000, ...Array.from({ length: 10 }, () => 100 * STEADY_SHARE - 1)]), {
      sessions: 1000,
      offeredPerS: 1000,
      binMs: 500,
    });
    expect(never.steadyMs).toBeUndefined();
  });
});

/**
 * Goal: the simulator stays fast enough to sweep hundreds of seeds in CI:
 * virtual time runs many times faster than the time it costs.
 * Method: a bounded run (three 40 s seeds of the CI sweep, after a short
 * warm-up) measured against the process's CPU time, which other work on a
 * shared machine inflates far less than wall time; the wall-time ratio is
 * printed beside it. The floor is the one this test meets on a loaded
 * two-core CI machine; docs/testing.md has the figures measured.
 */
import { describe, expect, it } from 'vitest';
import { runSimulation, sweepOptions } from '../src/index.js';

/** Simulated seconds per CPU second, at least. */
const speedFloor = 15;

describe('simulator speed', () => {
  it(`runs at least ${speedFloor}x faster than the CPU time it uses`, () => {
    runSimulation(sweepOptions(99, { seconds: 10 }));
    const cpu0 = process.cpuUsage();
    const wall0 = performance.now();
    let simulatedSeconds = 0;
    for (const seed of [1, 2, 3]) simulatedSeconds += runSimulation(sweepOptions(seed, { seconds: 40 })).simulatedSeconds;
    const cpu = process.cpuUsage(cpu0);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const wallSeconds = (performance.now() - wall0) / 1000;
    console.log(
      `simulator: ${simulatedSeconds} s simulated in ${cpuSeconds.toFixed(2)} s CPU (${(simulatedSeconds / cpuSeconds).toFixed(1)}x), ${wallSeconds.toFixed(2)} s wall (${(simulatedSeconds / wallSeconds).toFixed(1)}x)`,
    );
    expect(simulatedSeconds).toBe(120);
    expect(simulatedSeconds / cpuSeconds).toBeGreaterThanOrEqual(speedFloor);
  });
});

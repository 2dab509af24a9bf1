/**
 * Goal: one seed fixes a whole run, so every failure replays exactly.
 * Method: run ten seeds of the CI sweep twice each and compare their trace
 * hashes (every event, message and fault, in order) and outcomes; a
 * different seed must give a different trace.
 */
import { describe, expect, it } from 'vitest';
import { runSimulation, sweepOptions } from '../src/index.js';
import { seedRange } from './sweep.js';

describe('determinism', () => {
  it.each(seedRange(1, 10))('seed %i twice gives the same trace hash', (seed) => {
    const a = runSimulation(sweepOptions(seed, { seconds: 120 }));
    const b = runSimulation(sweepOptions(seed, { seconds: 120 }));
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.stats).toEqual(a.stats);
    expect(b.violationCount).toBe(a.violationCount);
  });

  it('another seed gives another trace', () => {
    const a = runSimulation(sweepOptions(1, { seconds: 20 }));
    const b = runSimulation(sweepOptions(2, { seconds: 20 }));
    expect(a.traceHash).not.toBe(b.traceHash);
  });
});

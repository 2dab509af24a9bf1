/**
 * Goal: the meta group this process runs keeps every acknowledged write, and
 * its members agree, under message loss, delay and crashes with torn
 * in-flight writes (including power cuts of the whole group).
 * Method: the simulator's meta-group run (@fencer/sim runMetaSimulation, also
 * in libs/sim's CI sweep) on the seeds below; first a check that the class it
 * drives is the very MetaGroup main.ts wires to sockets. Its checkers:
 * acknowledged creates survive, routing versions read behind a barrier never
 * go back, members converge byte-identical. META_SIM_SEEDS seeds (default
 * 12); a failure names its seed and replay command (META_SIM_SEED=N replays
 * one here).
 */
import { describe, expect, it } from 'vitest';
import { MetaGroup as SimulatedMetaGroup } from '@fencer/meta-fsm/group';
import { metaReplayCommand, runMetaSimulation } from '@fencer/sim';
import { MetaGroup } from '../src/index.js';

const SEEDS = process.env['META_SIM_SEED']
  ? [Number(process.env['META_SIM_SEED'])]
  : Array.from({ length: Number(process.env['META_SIM_SEEDS'] ?? 12) }, (_, i) => i + 1);

describe('the meta group under loss and crashes (seeded simulation)', () => {
  it('the simulator drives the production class', () => {
    expect(MetaGroup).toBe(SimulatedMetaGroup);
  });

  it.each(SEEDS)('seed %i keeps every acknowledged write and converges', (seed) => {
    const report = runMetaSimulation({ seed });
    if (process.env['META_SIM_VERBOSE']) console.log(`seed ${seed}: ${JSON.stringify(report.stats)}`);
    const detail = report.violations.map((v) => `${v.checker}: ${v.detail}`).join('\n  ');
    expect(report.violations, `seed ${seed}; replay: ${metaReplayCommand({ seed })}\n  ${detail}`).toEqual([]);
    expect(report.stats.acked).toBeGreaterThan(20);
  });
});

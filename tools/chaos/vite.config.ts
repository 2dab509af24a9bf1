import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

// One file at a time: a chaos run's floors (operations, expiries, fenced writes) need the
// machine's two cores more than they need to overlap with the other 120 s run.
export default fencerVitestConfig('chaos', { maxWorkers: 1, fileParallelism: false, testTimeout: 480_000 });

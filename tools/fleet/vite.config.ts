import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

// One file at a time: each test runs a whole fleet of processes on the machine's two cores.
export default fencerVitestConfig('fleet', { maxWorkers: 1, fileParallelism: false, testTimeout: 300_000, hookTimeout: 300_000 });

import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

// Multi-process tests share two cores with the cells they start: one file at a time.
export default fencerVitestConfig('cell-router', { fileParallelism: false, testTimeout: 60_000 });

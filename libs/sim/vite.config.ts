import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

// The sweep and bug-switch files are CPU-bound simulations: two workers (the
// machine's cores), and time enough for a bug test to try its 200 seeds.
export default fencerVitestConfig('sim', { maxWorkers: 2, testTimeout: 600_000 });

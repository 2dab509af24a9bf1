import { configDefaults } from 'vitest/config';
import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

// The sweep and bug-switch files are CPU-bound simulations: two workers (the
// machine's cores), and time enough for a bug test to try its 200 seeds.
// The speed test runs in a worker process of its own whose V8 does all its
// work (garbage collection, compilation) on the main thread, so that the
// process's CPU time is the work the simulator caused: see its header.
export default fencerVitestConfig('sim', {
  maxWorkers: 2,
  testTimeout: 600_000,
  projects: [
    { extends: true, test: { name: 'sim', exclude: [...configDefaults.exclude, 'test/speed.spec.ts'] } },
    {
      extends: true,
      // The preset's include is merged in, so the other files are excluded.
      test: {
        name: 'sim-speed',
        exclude: [...configDefaults.exclude, 'src/**', 'test/**/!(speed).spec.ts'],
        pool: 'forks',
        execArgv: ['--single-threaded'],
      },
    },
  ],
});

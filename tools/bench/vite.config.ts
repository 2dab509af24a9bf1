import { fencerVitestConfig } from '../vitest/preset.mjs';

// Unit tests of the benchmark's command line and report writing; no suite runs.
export default fencerVitestConfig('bench');

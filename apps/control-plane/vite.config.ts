import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

// One test file at a time: two of them start real cells and control-plane processes, which on a loaded
// two-core machine must not compete with each other for the CPU their elections and fsyncs need.
export default fencerVitestConfig('control-plane', { fileParallelism: false });

import { fencerVitestConfig } from '../vitest/preset.mjs';

// One fresh clone, one install, one build and one local fleet: minutes, not seconds.
export default fencerVitestConfig('readme-check', { testTimeout: 900_000, hookTimeout: 300_000 });

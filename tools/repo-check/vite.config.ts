import { fencerVitestConfig } from '../vitest/preset.mjs';

export default fencerVitestConfig('repo-check');

import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

export default fencerVitestConfig('object-store', { fileParallelism: false });

import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

export default fencerVitestConfig('infra');

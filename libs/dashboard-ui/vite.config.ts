import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

export default fencerVitestConfig('dashboard-ui');

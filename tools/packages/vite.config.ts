import { fencerVitestConfig } from '../../tools/vitest/preset.mjs';

// Packing, one npm install from the tarballs and a three-replica fleet: minutes on a loaded machine.
export default fencerVitestConfig('packages', { testTimeout: 180_000, hookTimeout: 300_000 });

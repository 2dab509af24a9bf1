import type { UserConfig } from 'vitest/config';
export declare function fencerVitestConfig(projectName: string, test?: Record<string, unknown>): UserConfig;

// Shared Vitest settings for every project: resolve workspace packages to
// their TypeScript sources, and write a JSON report per project so that
// `npm test` can print one summed `N passed, N failed` line.
import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const workspaceRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// Node's own conditions (plus our source one), never bundlers' 'module': a package's 'module' build may be
// meant for a bundler only (the AWS SDK's dist-es imports files without extensions, which Node cannot load),
// and tests should load what production loads.
const conditions = ['@fencer/source', 'node', 'import', 'default'];

/** @param {string} projectName @param {Record<string, unknown>} [test] */
export function fencerVitestConfig(projectName, test = {}) {
  return defineConfig({
    resolve: { conditions },
    ssr: { resolve: { conditions, externalConditions: ['@fencer/source'] } },
    test: {
      environment: 'node',
      include: ['src/**/*.spec.ts', 'test/**/*.spec.ts'],
      reporters: ['default', 'json'],
      outputFile: { json: path.join(workspaceRoot, '.reports/vitest', `${projectName}.json`) },
      testTimeout: 30_000,
      hookTimeout: 60_000,
      ...test,
    },
  });
}

/**
 * Goal: the package graph's rules (docs/decisions/0018-package-layers.md)
 * hold on the tree, and `tools/scripts/check-graph.mjs`, which `npm test`
 * runs, fails naming the package and the file when one is broken.
 * Method: run the script on this workspace (it must pass), then on copies
 * of the workspace's packages with one mistake planted in each: an app that
 * imports another app, a lib that imports an app, a deep import past a
 * package's public entry, a relative path into another package, a cycle.
 * The copy holds no install and no build output; the script reads only
 * package.json files and sources.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { copyWorkspace, root } from './support.js';

function checkGraph(workspace: string): { status: number | null; output: string } {
  const r = spawnSync(process.execPath, [path.join(workspace, 'tools/scripts/check-graph.mjs')], { encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

function plant(workspace: string, file: string, text: string): void {
  mkdirSync(path.dirname(path.join(workspace, file)), { recursive: true });
  writeFileSync(path.join(workspace, file), text);
}

function addDependency(workspace: string, pkgDir: string, dep: string): void {
  const file = path.join(workspace, pkgDir, 'package.json');
  const pkg = JSON.parse(readFileSync(file, 'utf8')) as { dependencies?: Record<string, string> };
  pkg.dependencies = { ...pkg.dependencies, [dep]: '*' };
  writeFileSync(file, JSON.stringify(pkg, null, 2));
}

const copies: string[] = [];
function freshCopy(): string {
  const dir = copyWorkspace();
  copies.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of copies.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('the package graph', () => {
  it('holds every rule on the tree', () => {
    const r = checkGraph(root);
    expect(r.output).toMatch(/package graph: \d+ packages/);
    expect(r.status, r.output).toBe(0);
  });

  it('an app importing another app fails the check, naming both and the file', () => {
    const ws = freshCopy();
    plant(ws, 'apps/session-proxy/src/planted.ts', "import '@fencer/cell-router';\n");
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toContain('app apps/session-proxy (@fencer/session-proxy) depends on app apps/cell-router (@fencer/cell-router)');
    expect(r.output).toContain('apps/session-proxy/src/planted.ts');
  });

  it('an app importing another app from its tests fails too', () => {
    const ws = freshCopy();
    plant(ws, 'apps/cell-router/test/planted.spec.ts', "import { runCli } from '@fencer/cli';\nvoid runCli;\n");
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toContain(
      'app apps/cell-router (@fencer/cell-router) depends on app apps/cli (@fencer/cli) (apps/cell-router/test/planted.spec.ts)',
    );
  });

  it('an app listed in another app’s package.json fails, naming the package.json', () => {
    const ws = freshCopy();
    addDependency(ws, 'apps/cli', '@fencer/cell-node');
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toContain('app apps/cli (@fencer/cli) depends on app apps/cell-node (@fencer/cell-node) (apps/cli/package.json)');
  });

  it('a lib importing an app fails', () => {
    const ws = freshCopy();
    plant(ws, 'libs/client/src/planted.ts', "export { x } from '@fencer/control-plane';\n");
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toContain('lib libs/client (@fencer/client) depends on app apps/control-plane (@fencer/control-plane)');
  });

  it('libs/base depending on anything fails', () => {
    const ws = freshCopy();
    plant(ws, 'libs/base/src/planted.ts', "export * from '@fencer/raft';\n");
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toContain('libs/base depends on libs/raft (@fencer/raft) (libs/base/src/planted.ts)');
  });

  it('a deep import past a package’s public entries fails, listing the entries', () => {
    const ws = freshCopy();
    plant(ws, 'tools/chaos/src/planted.ts', "import '@fencer/raft/src/raft.js';\n");
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toContain('tools/chaos/src/planted.ts imports "@fencer/raft/src/raft.js", which is not a public entry of libs/raft');
  });

  it('a relative path into another package fails', () => {
    const ws = freshCopy();
    plant(ws, 'tools/fleet/planted.mjs', "import '../../libs/raft/dist/index.js';\n");
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toContain('tools/fleet/planted.mjs imports "../../libs/raft/dist/index.js", a path outside tools/fleet');
  });

  it('a cycle between libs fails, naming the loop', () => {
    const ws = freshCopy();
    plant(ws, 'libs/raft/src/planted.ts', "export * from '@fencer/replica';\n");
    const r = checkGraph(ws);
    expect(r.status).toBe(1);
    expect(r.output).toMatch(/cycle: libs\/raft → libs\/replica → .*libs\/raft|cycle: libs\/replica → libs\/raft → libs\/replica/);
  });
});

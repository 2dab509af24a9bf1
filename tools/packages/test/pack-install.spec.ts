/**
 * Goal: a team that wants Fencer installs two npm packages and nothing of
 * the monorepo: @fencer/client (with the protocol types it needs) and
 * @fencer/cli (the `fencer` command). Each packs with `npm pack` into a
 * tarball that names no workspace package, carries built ESM with type
 * declarations, and works: TypeScript type-checks a consumer against the
 * declarations (an expected type error proves they are not `any`), the
 * consumer takes a lock through a router of a local fleet, and
 * `npx fencer --help` and `npx fencer lock` run from the installed bin.
 * Method: tools/packages/pack.mjs builds and packs both into a temp folder;
 * an empty project under the OS temp dir (outside the monorepo) installs the
 * tarballs with npm (third-party dependencies, typescript and @types/node
 * from the registry, the npm cache first); a fleet of one three-replica cell,
 * one router and one proxy (tools/fleet) starts meanwhile on free 127.0.0.1
 * ports.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';
import { ROOT, cleanNpmEnv, packAll, type PackedPackage } from '../pack.mjs';

const run = promisify(execFile);
const NPM_INSTALL_TIMEOUT_MS = 240_000;
const COMMAND_TIMEOUT_MS = 60_000;
const NAMESPACE = 'pkgtest';
/** Versions a user would pick: the ones the workspace builds with. */
const rootDevDeps = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).devDependencies as Record<string, string>;

/** The consumer's code: typed use of the client, one expected type error, a lock taken and its token printed. */
const CONSUMER_TS = `import { FencerClient, FencerError, type LockHandle } from '@fencer/client';

const [endpoints, proxies, name] = process.argv.slice(2) as [string, string, string];
const client = new FencerClient({ endpoints: endpoints.split(','), proxies: proxies.split(','), ttlMs: 10_000 });
/** Never called: the type checker reads it, and its expected error proves the declarations are not \`any\`. */
export function wrongName(): void {
  // @ts-expect-error -- a lock name is a string
  void client.acquire(42);
}
try {
  const token: number = await client.withLock(name, async (lock: LockHandle) => {
    lock.signal.throwIfAborted();
    return lock.token;
  });
  console.log(JSON.stringify({ token }));
} catch (e) {
  console.log(JSON.stringify({ error: e instanceof FencerError ? e.code : String(e) }));
  process.exitCode = 1;
} finally {
  await client.close();
}
`;

const CONSUMER_TSCONFIG = {
  compilerOptions: {
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    strict: true,
    skipLibCheck: false,
    types: ['node'],
    outDir: 'out',
    noEmitOnError: true,
  },
  files: ['take-lock.ts'],
};

let fleet: TestFleet | undefined;
let packed: PackedPackage[] = [];
let workDir = '';
let consumer = '';

/** Runs a command in the consumer project with npm's settings from the enclosing run removed. */
async function inConsumer(cmd: string, args: string[], env: Record<string, string> = {}, timeout = COMMAND_TIMEOUT_MS) {
  return run(cmd, args, { cwd: consumer, env: { ...cleanNpmEnv(), ...env }, timeout, maxBuffer: 16 * 1024 * 1024 });
}

async function makeConsumer(): Promise<void> {
  const startMs = performance.now();
  packed = await packAll(path.join(workDir, 'packages'));
  const packedMs = performance.now();
  consumer = path.join(workDir, 'consumer');
  await run('mkdir', ['-p', consumer]);
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }, null, 2));
  writeFileSync(path.join(consumer, 'tsconfig.json'), JSON.stringify(CONSUMER_TSCONFIG, null, 2));
  writeFileSync(path.join(consumer, 'take-lock.ts'), CONSUMER_TS);
  const typescript = `typescript@${rootDevDeps['typescript']}`;
  const nodeTypes = `@types/node@${rootDevDeps['@types/node']}`;
  await inConsumer(
    'npm',
    ['install', '--no-audit', '--no-fund', '--prefer-offline', ...packed.map((p) => p.tarball), typescript, nodeTypes],
    {},
    NPM_INSTALL_TIMEOUT_MS,
  );
  console.log(`packed in ${Math.round(packedMs - startMs)} ms, installed in ${Math.round(performance.now() - packedMs)} ms`);
}

beforeAll(async () => {
  // Outside the repository, so nothing resolves through the workspace's node_modules.
  workDir = mkdtempSync(path.join(os.tmpdir(), 'fencer-packages-'));
  const startMs = performance.now();
  const results = await Promise.allSettled([
    startTestFleet({ cells: 1, replicas: 3, routers: 1, proxies: 1, routes: { [NAMESPACE]: 'cell-1' } }),
    makeConsumer(),
  ]);
  // Keep the fleet even when packing failed, so that afterAll stops its processes.
  if (results[0].status === 'fulfilled') fleet = results[0].value;
  for (const r of results) if (r.status === 'rejected') throw r.reason;
  await fleet!.leaderOf('cell-1');
  console.log(`packed, installed and the fleet up in ${Math.round(performance.now() - startMs)} ms`);
});

afterAll(async () => {
  await fleet?.stop();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

/** Every file under `dir`. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const full = path.join(dir, e);
    return statSync(full).isDirectory() ? filesUnder(full) : [full];
  });
}

describe('the packed packages', () => {
  it('are outside the monorepo and name no workspace package, carrying their built code and declarations', () => {
    expect(path.relative(ROOT, consumer).startsWith('..')).toBe(true);
    for (const { name } of packed) {
      const installed = path.join(consumer, 'node_modules', name);
      const manifest = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8'));
      expect(manifest.private, name).toBeUndefined();
      expect(manifest.type, name).toBe('module');
      expect(
        Object.keys(manifest.dependencies).filter((d) => d.startsWith('@fencer/')),
        name,
      ).toEqual([]);
      const entries = Object.values(manifest.exports as Record<string, string | { types: string; default: string }>).flatMap((e) =>
        typeof e === 'string' ? [e] : [e.types, e.default],
      );
      for (const file of entries) expect(existsSync(path.join(installed, file)), `${name}: ${file}`).toBe(true);
      const code = filesUnder(path.join(installed, 'dist')).filter((f) => /\.(js|d\.ts)$/.test(f));
      const workspaceImports = code.filter((f) => /from ['"]@fencer\/|import\(['"]@fencer\//.test(readFileSync(f, 'utf8')));
      expect(workspaceImports, `${name} imports a workspace package`).toEqual([]);
      expect(existsSync(path.join(installed, 'README.md')), name).toBe(true);
    }
  });

  it('type-check in a TypeScript consumer, which takes a lock through the fleet\u2019s router and prints its fencing token', async () => {
    await inConsumer('node', ['node_modules/typescript/bin/tsc', '-p', '.']);
    const { stdout } = await inConsumer('node', [
      'out/take-lock.js',
      fleet!.routerEndpoints.join(','),
      fleet!.proxyEndpoints.join(','),
      `/ls/${NAMESPACE}/packaged`,
    ]);
    const answer = JSON.parse(stdout.trim().split('\n').pop()!) as { token?: number; error?: string };
    expect(answer.error).toBeUndefined();
    expect(answer.token).toBeGreaterThan(0);
  });

  it('`npx fencer --help` runs the installed CLI and lists its commands', async () => {
    const { stdout } = await inConsumer('npx', ['--no-install', 'fencer', '--help']);
    for (const command of ['lock', 'get', 'watch', 'cell', 'tenants']) expect(stdout).toMatch(new RegExp(`^\\s+${command}\\b`, 'm'));
  });

  it('`npx fencer lock` runs a command under a lock taken through the router', async () => {
    const { stdout } = await inConsumer(
      'npx',
      [
        '--no-install',
        'fencer',
        'lock',
        `/ls/${NAMESPACE}/cli`,
        '--',
        'node',
        '-e',
        'console.log("token=" + process.env.FENCER_LOCK_TOKEN)',
      ],
      { FENCER_ENDPOINTS: fleet!.routerEndpoints.join(','), FENCER_PROXIES: fleet!.proxyEndpoints.join(',') },
    );
    const token = /^token=(\d+)$/m.exec(stdout)?.[1];
    expect(Number(token)).toBeGreaterThan(0);
  });
});

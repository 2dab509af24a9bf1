/**
 * Goal: the README's quick start and its "Try it" lines work on a fresh clone,
 * as a new user runs them: `npm start` installs, builds and brings a fleet up,
 * and then every "Try it" line exits 0 (the long-running `fencer watch` line
 * shows a lock taken while it runs).
 * Method: clone this repository's HEAD into a temporary folder, run the quick
 * start's `npm start` there (its default ports when they are free, else the
 * same command with `-- --port-base` of a free block), wait for the fleet's
 * "up" banner, then run each line of the README's "Try it" block with `sh -c`
 * in the clone. The fleet's process group is stopped with SIGTERM at the end.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const FLEET_UP_MS_MAX = 600_000;
const LINE_MS_MAX = 120_000;
const WATCH_SEEN_MS_MAX = 60_000;
/** The launcher prints this once every replica is up and a leader is known. */
const FLEET_UP_BANNER = /Ctrl-C stops the fleet/;

/** The commands of the first ```sh block after `heading`, without comments. */
export function shellBlock(readme: string, heading: string): string[] {
  const at = readme.indexOf(heading);
  if (at < 0) throw new Error(`README.md has no "${heading}" section`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block) throw new Error(`README.md's "${heading}" section has no sh block`);
  return block[1]!
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** True when every port of the launcher's default layout is free (base 7000: replicas +1…, admin +101…, metrics +201…, peers +301…, routers +401…, proxies +501…/+551…, control planes +601…/+651…/+701…). */
async function blockFree(base: number): Promise<boolean> {
  for (const offset of [0, 100, 200, 300, 400, 500, 550, 600, 650, 700])
    for (let i = 1; i <= 20; i++) if (!(await portFree(base + offset + i))) return false;
  return true;
}

function waitForOutput(child: ChildProcess, pattern: RegExp, timeoutMs: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(
      () => reject(new Error(`${what}: no ${pattern} within ${timeoutMs} ms; output so far:\n${seen.slice(-4000)}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        resolve(seen);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code ?? signal}) before ${pattern}; output:\n${seen.slice(-4000)}`));
    });
  });
}

function run(line: string, cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', line], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), LINE_MS_MAX);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
const quickStart = shellBlock(readme, '## Quick start');
const tryIt = shellBlock(readme, '### Try it');

let work = '';
let clone = '';
let fleet: ChildProcess | undefined;

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'fencer-readme-'));
  clone = path.join(work, 'fencer');
  execFileSync('git', ['clone', '--quiet', '--no-hardlinks', root, clone]);
  const start = quickStart.find((l) => l.startsWith('npm start'));
  if (!start) throw new Error('the quick start has no `npm start` line');
  let line = start;
  if (!(await blockFree(7000))) {
    // A developer's own fleet holds the default ports: same command, another block.
    let base = 5000;
    while (!(await blockFree(base))) base += 500;
    line = `${start} -- --port-base ${base}`;
  }
  fleet = spawn('sh', ['-c', line], { cwd: clone, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CI: '' } });
  await waitForOutput(fleet, FLEET_UP_BANNER, FLEET_UP_MS_MAX, line);
}, FLEET_UP_MS_MAX + 60_000);

afterAll(async () => {
  if (fleet?.pid !== undefined && fleet.exitCode === null) {
    const exited = new Promise((resolve) => fleet!.once('exit', resolve));
    process.kill(-fleet.pid, 'SIGTERM');
    await exited;
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the README's quick start on a fresh clone", () => {
  it('names exactly the two commands a new user needs', () => {
    expect(quickStart).toEqual(['npm start', 'npm test']);
  });

  it.each(tryIt.filter((l) => !/\bfencer watch\b/.test(l)))('"Try it": %s exits 0', async (line) => {
    const r = await run(line, clone);
    expect(r.code, r.output).toBe(0);
  });

  it.each(tryIt.filter((l) => /\bfencer watch\b/.test(l)))('"Try it": %s shows a lock taken while it runs', async (line) => {
    const watch = spawn('sh', ['-c', line], { cwd: clone, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const name = '/ls/demo/readme-watched';
      const seen = waitForOutput(watch, /readme-watched/, WATCH_SEEN_MS_MAX, line);
      seen.catch(() => {});
      // Held for 5 s: a watch that opens while it is held shows it in its snapshot, one open before shows the grant.
      const taken = await run(`node tools/try/try-lock.mjs ${name} 5000`, clone);
      expect(taken.code, taken.output).toBe(0);
      expect(await seen).toContain(name);
    } finally {
      if (watch.pid !== undefined && watch.exitCode === null) process.kill(-watch.pid, 'SIGTERM');
    }
  });
});

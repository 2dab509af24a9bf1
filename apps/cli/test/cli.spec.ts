/**
 * Goal: the `fencer` CLI as its help documents it: argument parsing with
 * durations, endpoint discovery (--endpoints, FENCER_ENDPOINTS, fleet.json),
 * human and --json output of get/list/watch/cell status, and every exit code
 * it documents.
 * Method: runCli in-process (the same function main.ts calls) against the
 * in-process fake LockService; stdout/stderr captured as strings.
 */
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencerClient } from '@fencer/client';
import { FakeLockService } from '@fencer/client/testing';
import { EXIT, runCli, type CliIo } from '../src/index.js';

let fake: FakeLockService;
let holder: FencerClient;
const dirs: string[] = [];

beforeAll(async () => {
  fake = await FakeLockService.start({
    adminStatus: {
      cellId: 'cell-1',
      nodeId: 'cell-1-r1',
      role: 'leader',
      term: 3,
      leaderId: 'cell-1-r1',
      leaderAddress: '',
      commitIndex: 120,
      appliedIndex: 120,
      lastIndex: 121,
      snapshotIndex: 0,
      members: [
        { id: 'cell-1-r1', address: '', peerAddress: '', voter: true, matchIndex: 121, lag: 0, state: 'self' },
        { id: 'cell-1-r2', address: '', peerAddress: '', voter: true, matchIndex: 118, lag: 3, state: 'replicate' },
      ],
      revisionBase: 0,
      sessions: 1,
      locks: 1,
      waiters: 0,
    },
  });
  holder = new FencerClient({ endpoints: [fake.address], clientId: 'holder-7' });
});

afterAll(async () => {
  await holder.close();
  await fake.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Run {
  code: number;
  out: string;
  err: string;
}

async function run(argv: string[], extra: Partial<CliIo> = {}): Promise<Run> {
  let out = '';
  let err = '';
  const code = await runCli(argv, {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    env: extra.env ?? { FENCER_ENDPOINTS: fake.address },
    cwd: extra.cwd ?? process.cwd(),
    clientOptions: { backoffBaseMs: 5, backoffMaxMs: 20 },
    ...extra,
  });
  return { code, out, err };
}

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'fencer-cli-'));
  dirs.push(d);
  return d;
}

describe('usage', () => {
  it('--help lists the commands and the exit codes, and exits 0', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(EXIT.OK);
    for (const word of ['lock', 'get', 'list', 'watch', 'cell', 'Exit codes:', '75', '80']) expect(r.out).toContain(word);
  });

  it('lock --help shows the options with their defaults', async () => {
    const r = await run(['lock', '--help']);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/--wait <duration>.*\(default: 30s\)/s);
    expect(r.out).toMatch(/--kill-after <duration>/);
    expect(r.out).toMatch(/--strict/);
  });

  it.each([
    [['lock', '/ls/a/b']],
    [['lock', '/ls/a/b', '--wait', '5x', '--', 'true']],
    [['lock', '/ls/a/b', '--ttl', '', '--', 'true']],
    [['watch', '/ls/a/b', '--since', '-1']],
    [['frobnicate']],
    [['get']],
  ])('%j is a usage error (64)', async (argv) => {
    const r = await run(argv);
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).not.toBe('');
  });

  it('no endpoints anywhere is a configuration error (78)', async () => {
    const r = await run(['get', '/ls/a/b'], { env: {}, cwd: tempDir() });
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/--endpoints.*FENCER_ENDPOINTS.*fleet\.json/);
  });

  it('an invalid name is refused by the service (1)', async () => {
    const r = await run(['get', 'not-a-name']);
    expect(r.code).toBe(EXIT.ERROR);
    expect(r.err).toMatch(/INVALID_NAME/);
  });

  it('an unreachable service is 69 after the retry budget', async () => {
    const down = await FakeLockService.start();
    const address = down.address;
    await down.stop();
    const r = await run(['--timeout', '200ms', 'get', '/ls/a/b'], { env: { FENCER_ENDPOINTS: address } });
    expect(r.code).toBe(EXIT.UNAVAILABLE);
  });
});

describe('endpoints', () => {
  it('come from .fencer/fleet.json in the working directory or above', async () => {
    const root = tempDir();
    mkdirSync(path.join(root, '.fencer'));
    writeFileSync(
      path.join(root, '.fencer', 'fleet.json'),
      JSON.stringify({ lockService: [fake.address], cells: [{ id: 'cell-1', replicas: [{ id: 'cell-1-r1', admin: fake.address }] }] }),
    );
    const sub = path.join(root, 'a', 'b');
    mkdirSync(sub, { recursive: true });
    const r = await run(['--json', 'get', '/ls/f/x'], { env: {}, cwd: sub });
    expect(r.code).toBe(EXIT.OK);
    expect(JSON.parse(r.out)).toMatchObject({ name: '/ls/f/x', mode: 'free' });
    const s = await run(['cell', 'status'], { env: {}, cwd: sub });
    expect(s.code).toBe(EXIT.OK);
    expect(s.out).toMatch(/leader cell-1-r1 \(term 3\)/);
  });

  it('--endpoints wins over FENCER_ENDPOINTS', async () => {
    const r = await run(['--endpoints', fake.address, 'get', '/ls/f/y'], { env: { FENCER_ENDPOINTS: 'nowhere:1' } });
    expect(r.code).toBe(EXIT.OK);
  });

  it('a malformed endpoint list is a configuration error', async () => {
    const r = await run(['get', '/ls/f/y'], { env: { FENCER_ENDPOINTS: 'no-port' } });
    expect(r.code).toBe(EXIT.CONFIG);
  });
});

describe('get, list, watch, cell status', () => {
  it('get shows holders and tokens, human and --json', async () => {
    const h = await holder.acquire('/ls/cli/get');
    const human = await run(['get', '/ls/cli/get']);
    expect(human.code).toBe(EXIT.OK);
    expect(human.out).toContain(`/ls/cli/get: held exclusive (revision ${fake.revision})`);
    expect(human.out).toContain(`token ${h.token}`);
    expect(human.out).toContain('client holder-7');
    const json = JSON.parse((await run(['get', '/ls/cli/get', '--json'])).out);
    expect(json).toMatchObject({ name: '/ls/cli/get', mode: 'exclusive', revision: fake.revision });
    expect(json.holders[0]).toMatchObject({ token: h.token, clientId: 'holder-7' });
    await h.release();
  });

  it('list prints one line per live lock; --json one object per line', async () => {
    const a = await holder.acquire('/ls/cli/list/a');
    const b = await holder.acquire('/ls/cli/list/b', { mode: 'shared' });
    const human = await run(['list', '/ls/cli/list/']);
    expect(human.out.trim().split('\n')).toHaveLength(2);
    expect(human.out).toMatch(/\/ls\/cli\/list\/b\s+shared/);
    const lines = (await run(['--json', 'list', '/ls/cli/list/'])).out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.name)).toEqual(['/ls/cli/list/a', '/ls/cli/list/b']);
    expect((await run(['list', '/ls/cli/list/', '--limit', '1'])).out.trim().split('\n')).toHaveLength(1);
    await a.release();
    await b.release();
    expect((await run(['list', '/ls/cli/list/'])).out).toMatch(/no live locks/);
  });

  it('watch --since prints the history after it; --count ends it', async () => {
    const h = await holder.acquire('/ls/cli/w');
    await h.release();
    const r = await run(['watch', '/ls/cli/w', '--since', String(h.token - 1), '--count', '2', '--json']);
    expect(r.code).toBe(EXIT.OK);
    const events = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events.map((e) => [e.type, e.revision])).toEqual([
      ['acquired', h.token],
      ['released', h.token + 1],
    ]);
  });

  it('watch runs until interrupted, then exits 0', async () => {
    const ac = new AbortController();
    const running = run(['watch', '/ls/cli/wi/', '--progress'], { signal: ac.signal });
    await new Promise<void>((resolve) => fake.once('call', () => resolve()));
    const h = await holder.acquire('/ls/cli/wi/x');
    ac.abort();
    const r = await running;
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toContain('progress');
    await h.release();
  });

  it('cell status shows role, term, indexes and lag per replica; unreachable ones too', async () => {
    const down = await FakeLockService.start();
    const downAddress = down.address;
    await down.stop();
    const r = await run(['cell', 'status', '--admin', `${fake.address},${downAddress}`]);
    expect(r.code).toBe(EXIT.OK);
    const lines = r.out.trim().split('\n');
    expect(lines[0]).toBe('cell cell-1  leader cell-1-r1 (term 3)');
    expect(lines[1]).toMatch(/^replica\s+role\s+term\s+commit\s+applied\s+last\s+lag$/);
    expect(lines[2]).toMatch(/^cell-1-r1\s+leader\s+3\s+120\s+120\s+121\s+0$/);
    expect(lines[3]).toMatch(new RegExp(`^${downAddress.replace(/\./g, '\\.')}\\s+unreachable$`));
    const json = JSON.parse((await run(['--json', 'cell', 'status', '--admin', fake.address])).out);
    expect(json).toMatchObject({ leaderId: 'cell-1-r1', term: 3 });
    expect(json.replicas[0]).toMatchObject({ role: 'leader', commitIndex: 120, lastIndex: 121, lag: 0, reachable: true });
  });

  it('cell status with no replica reachable is 69', async () => {
    const down = await FakeLockService.start();
    const a = down.address;
    await down.stop();
    const r = await run(['cell', 'status', '--admin', a]);
    expect(r.code).toBe(EXIT.UNAVAILABLE);
  });
});

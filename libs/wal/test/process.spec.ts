/**
 * Goal: durability with a real process and a real file system.
 * 1. A child appending under group commit is killed with SIGKILL at random
 *    moments (after 1 to 1,200 more acknowledgements), 24 cycles; after each restart every record it reported synced
 *    is present and intact (the child verifies each recovered entry and the
 *    snapshot byte for byte and reports its recovered range).
 * 2. Under Debian's `fiu-run`, one fdatasync fails (EIO) mid-run: the child
 *    exits non-zero, reports nothing synced after the failure, and
 *    everything it reported is on disk. The fault fires once only, so a store
 *    that retried the fsync would succeed and carry on instead of exiting.
 * 3. Under `fiu-run`, one write-path pwrite (EIO, ENOSPC), one fdatasync
 *    (ENOSPC), one rename (a new segment's, a snapshot's), one directory
 *    fsync or one unlink (compaction) fails: the child
 *    logs the failed call, exits 1, acknowledges nothing after it, and a
 *    restart without faults recovers everything acknowledged, intact, and
 *    removes the half-made file.
 * The first two run with fdatasync on libuv's thread pool, and again with it
 * on the event loop (NodeDiskOptions.syncOnLoop: mixed with the pool under
 * kills, always on the loop under fiu), the two ways a cell node syncs.
 * Method: spawn `node test/fixtures/appender.mjs` over the built library
 * (built in beforeAll with `tsc -b`, as Node 20 cannot run .ts), read its
 * stdout line by line, kill or fault it (faults armed with `fiu-ctrl` once
 * the child's output shows it reached the state the case needs), restart it
 * on the same directory. Without fiu-run the fault cases (named "needs
 * Debian fiu-utils") skip and say so, unless CI is set: then they run and
 * fail, naming the Debian package (FIU_RUN=<path> overrides where fiu-run
 * is looked for, to try that).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SeededRandom } from '@fencer/base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
const appender = path.join(here, 'fixtures/appender.mjs');
const fiuRun = process.env.FIU_RUN ?? ['/usr/bin/fiu-run', '/usr/local/bin/fiu-run'].find((p) => fs.existsSync(p));
const fiuMissing =
  fiuRun === undefined || !fs.existsSync(fiuRun)
    ? `fiu-run not found${fiuRun === undefined ? '' : ` at ${fiuRun}`}: install the Debian package fiu-utils (apt-get install -y fiu-utils)`
    : null;
const ci = (process.env.CI ?? '') !== '' && process.env.CI !== 'false' && process.env.CI !== '0';
/** Fault tests skip without fiu-run outside CI (saying so once); in CI they run, and fail with `fiuMissing`. */
const skipFiu = fiuMissing !== null && !ci;
const itFiu = it.skipIf(skipFiu);
if (skipFiu) console.warn('process.spec: fault cases skipped: needs Debian fiu-utils (apt-get install fiu-utils); .ci/run installs it');

/** fiu-run and fiu-ctrl, or the error that names the missing package. */
function fiuTools(): { run: string; ctrl: string } {
  if (fiuMissing !== null || fiuRun === undefined) throw new Error(fiuMissing ?? 'fiu-run not found');
  return { run: fiuRun, ctrl: path.join(path.dirname(fiuRun), 'fiu-ctrl') };
}

let tmp = '';

beforeAll(() => {
  // Build this library (and what it references) so the child can import dist/.
  execFileSync(
    process.execPath,
    [path.join(root, 'node_modules/typescript/bin/tsc'), '-b', path.join(root, 'libs/wal/tsconfig.lib.json')],
    { stdio: 'inherit' },
  );
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fencer-wal-'));
}, 120_000);

afterAll(() => {
  if (tmp !== '') fs.rmSync(tmp, { recursive: true, force: true });
});

interface Child {
  proc: ChildProcess;
  lines: string[];
  /** What the child wrote to stderr so far. */
  stderr(): string;
  /** Resolves with the first line matching, rejects if the child exits first. */
  waitFor(re: RegExp): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function start(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Child {
  const proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const lines: string[] = [];
  const waiters: Array<{ re: RegExp; resolve: (l: string) => void; reject: (e: Error) => void }> = [];
  let stderr = '';
  let partial = '';
  proc.stdout!.setEncoding('utf8');
  proc.stdout!.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      for (const w of waiters.filter((x) => x.re.test(line))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (c: string) => (stderr += c));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on('close', (code, signal) => {
      for (const w of waiters.splice(0))
        w.reject(
          new Error(`child exited (${code ?? signal}) before ${w.re}; stdout tail: ${lines.slice(-3).join(' | ')}; stderr: ${stderr}`),
        );
      resolve({ code, signal });
    });
  });
  return {
    proc,
    lines,
    stderr: () => stderr,
    exited,
    waitFor(re) {
      const seen = lines.find((l) => re.test(l));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => waiters.push({ re, resolve, reject }));
    },
  };
}

function syncedIndexes(lines: readonly string[]): number[] {
  return lines.filter((l) => l.startsWith('synced ')).map((l) => Number(l.slice(7)));
}

/** Starts the appender on dir; checks it recovered at least `mustHave`; returns the child and its recovered range. */
async function startAppender(
  dir: string,
  mustHave: number,
  wrap: string[] = [],
  env: NodeJS.ProcessEnv = {},
  segmentBytes?: number,
): Promise<{ child: Child; last: number }> {
  const [cmd, ...pre] = wrap.length > 0 ? wrap : [process.execPath];
  const args = [appender, dir, '16', ...(segmentBytes === undefined ? [] : [String(segmentBytes)])];
  const child = start(cmd!, wrap.length > 0 ? [...pre, process.execPath, ...args] : args, env);
  const line = await child.waitFor(/^(recovered|verify-bad|open-error)/);
  expect(line).toMatch(/^recovered /);
  const [, first, last, commit, snapshot] = line.split(' ').map(Number);
  // Every record reported synced before the crash is there (and was verified intact by the child):
  // the log reaches it, and the log continues the snapshot without a hole, so every index up to
  // `last` is in one or the other. (The log may start after `mustHave + 1` when the snapshot does:
  // the child snapshots only what it has seen synced, but "synced" lines it wrote while its stdout
  // socket was full were still queued in the child when it was killed, and never reached us.)
  expect(last).toBeGreaterThanOrEqual(mustHave);
  expect(first).toBeLessThanOrEqual(snapshot! + 1);
  expect(commit).toBeLessThanOrEqual(last!);
  return { child, last: last! };
}

/** The last "syncs <loop> <pool>" line: how many fdatasyncs ran where. */
function syncCounts(lines: readonly string[]): { loop: number; pool: number } {
  const last = lines.findLast((l) => l.startsWith('syncs '));
  const [, loop, pool] = (last ?? 'syncs 0 0').split(' ').map(Number);
  return { loop: loop!, pool: pool! };
}

describe.each([
  { syncs: 'pool', kills: 'pool', fiu: 'pool' },
  { syncs: 'loop', kills: 'mixed', fiu: 'loop' },
])('real process, fdatasync on the $syncs', ({ kills, fiu }) => {
  it(`loses nothing it reported synced across 24 SIGKILLs at random moments (syncs: ${kills})`, async () => {
    const dir = path.join(tmp, `sigkill-${kills}`);
    const env = { APPENDER_SYNCS: kills };
    const random = new SeededRandom(Number(process.env.WAL_KILL_SEED ?? 20261130));
    let mustHave = 0;
    let totalSynced = 0;
    let syncsOnLoop = 0;
    let syncsInPool = 0;
    for (let cycle = 0; cycle < 24; cycle++) {
      const { child, last } = await startAppender(dir, mustHave, [], env);
      // A random moment, counted in acknowledgements so that the log grows as much on a loaded
      // machine as on an idle one: 16 saves are still in flight, mid-batch, mid-roll or mid-snapshot.
      await child.waitFor(new RegExp(`^synced ${last + 1 + random.int(1200)}$`));
      child.proc.kill('SIGKILL');
      const { signal } = await child.exited;
      expect(signal).toBe('SIGKILL');
      const synced = syncedIndexes(child.lines);
      expect(synced.length).toBeGreaterThan(0);
      // Callbacks fire in call order: the reports are consecutive.
      for (let k = 1; k < synced.length; k++) expect(synced[k]).toBe(synced[k - 1]! + 1);
      mustHave = Math.max(mustHave, synced.at(-1)!);
      totalSynced += synced.length;
      const counts = syncCounts(child.lines);
      syncsOnLoop += counts.loop;
      syncsInPool += counts.pool;
    }
    const { child } = await startAppender(dir, mustHave);
    child.proc.kill('SIGKILL');
    await child.exited;
    expect(totalSynced).toBeGreaterThan(24);
    // The fdatasyncs ran where this case says.
    expect(syncsInPool).toBeGreaterThan(0);
    if (kills === 'mixed') expect(syncsOnLoop).toBeGreaterThan(0);
    else expect(syncsOnLoop).toBe(0);
    // Segments rolled and were compacted along the way, and snapshots were taken.
    const names = fs.readdirSync(dir);
    expect(names.some((n) => n.startsWith('snap-'))).toBe(true);
    const seqs = names.filter((n) => n.endsWith('.wal')).map((n) => parseInt(n, 16));
    expect(Math.max(...seqs)).toBeGreaterThanOrEqual(3);
    expect(Math.min(...seqs)).toBeGreaterThan(1);
  }, 120_000);

  itFiu(
    `fiu-run: one fdatasync error makes the child exit non-zero having acknowledged only what was persisted (syncs: ${fiu}; needs Debian fiu-utils)`,
    async () => {
      const tools = fiuTools();
      const dir = path.join(tmp, `fiu-${fiu}`);
      const ctl = path.join(tmp, `fiu-ctl-${fiu}`);
      const env = { UV_USE_IO_URING: '0', APPENDER_SYNCS: fiu }; // else libuv's io_uring path bypasses the preloaded fault points
      const { child } = await startAppender(dir, 0, [tools.run, '-x', '-f', ctl], env);
      const pid = Number((await child.waitFor(/^pid /)).slice(4));
      // Let it acknowledge a good number of saves, then make the next fdatasync fail with EIO (errno 5).
      await child.waitFor(/^synced 500$/);
      const counts = syncCounts(child.lines);
      // On the loop whenever no other sync is out (a second cycle in flight still goes to the pool).
      expect(fiu === 'loop' ? counts.loop : counts.pool).toBeGreaterThan(0);
      if (fiu === 'pool') expect(counts.loop).toBe(0);
      execFileSync(tools.ctrl, ['-c', 'enable name=posix/io/sync/fdatasync,failinfo=5,onetime', '-f', ctl, String(pid)]);
      const synced = await expectCleanCrash(child, 'EIO', 'fdatasync', /^-$/);
      // Without the fault, a restart finds everything that was reported synced.
      const again = await startAppender(dir, synced.at(-1)!);
      again.child.proc.kill('SIGKILL');
      await again.child.exited;
    },
    60_000,
  );
});

/** Saves acknowledged after arming a fault beyond which it cannot be on the way (a segment rolls every ~3,000). */
const runawaySavesMax = 50_000;

/**
 * Waits for the child to exit after an injected fault and checks it crashed
 * cleanly: exit code 1, a "fatal" line naming the code, the failed call and
 * the file, and no acknowledgement after it. Returns the indexes it
 * acknowledged.
 */
async function expectCleanCrash(child: Child, code: string, syscall: string, file: RegExp): Promise<number[]> {
  // A fault that never reaches the store would leave the child appending: bound that by count, not time.
  const runawayAt = (syncedIndexes(child.lines).at(-1) ?? 0) + runawaySavesMax;
  const runaway = child.waitFor(new RegExp(`^synced ${runawayAt}$`)).then(
    () => true,
    () => false,
  );
  if (await Promise.race([child.exited.then(() => false), runaway])) {
    child.proc.kill('SIGKILL');
    await child.exited;
    throw new Error(
      `${runawaySavesMax} more saves were acknowledged after arming the fault: it never reached the store, or the store went past it (a retried fsync)`,
    );
  }
  const { code: exitCode } = await child.exited;
  const story = `stdout tail: ${child.lines.slice(-5).join(' | ')}; stderr: ${child.stderr()}`;
  expect(exitCode, story).toBe(1);
  const fatalAt = child.lines.findIndex((l) => l.startsWith('fatal '));
  expect(fatalAt, story).toBeGreaterThan(0);
  const [, gotCode, gotSyscall, gotFile] = child.lines[fatalAt]!.split(' ');
  expect({ code: gotCode, syscall: gotSyscall }, story).toEqual({ code, syscall });
  expect(gotFile, story).toMatch(file);
  // Nothing was acknowledged after the failure: the store fails for good and never retries.
  expect(
    child.lines.slice(fatalAt + 1).filter((l) => l.startsWith('synced ')),
    story,
  ).toEqual([]);
  const synced = syncedIndexes(child.lines);
  expect(synced.length, story).toBeGreaterThanOrEqual(500);
  return synced;
}

interface FaultCase {
  readonly name: string;
  /** libfiu's names of the failure points armed (all with the same errno, each failing once). */
  readonly points: readonly string[];
  readonly errno: number;
  readonly code: string;
  readonly syscall: string;
  /** The file name the failed call reports ('-' when the call carries none, as pwrite). */
  readonly file: RegExp;
  readonly env?: NodeJS.ProcessEnv;
  readonly segmentBytes?: number;
}

/** The store writes only with pwrite (one buffer); pwritev is armed too, so a change to writev is still covered. */
const writePoints = ['posix/io/rw/pwrite', 'posix/io/rw/pwritev'];

const faultCases: readonly FaultCase[] = [
  { name: 'a write-path pwrite fails with EIO', points: writePoints, errno: 5, code: 'EIO', syscall: 'write', file: /^-$/ },
  {
    name: 'a write-path pwrite fails with ENOSPC (disk full)',
    points: writePoints,
    errno: 28,
    code: 'ENOSPC',
    syscall: 'write',
    file: /^-$/,
  },
  {
    name: 'an fdatasync fails with ENOSPC',
    points: ['posix/io/sync/fdatasync'],
    errno: 28,
    code: 'ENOSPC',
    syscall: 'fdatasync',
    file: /^-$/,
  },
  // No snapshots: the next rename is the one that names the segment after the spare.
  {
    name: 'the rename of a new segment fails with EIO',
    points: ['posix/io/dir/rename'],
    errno: 5,
    code: 'EIO',
    syscall: 'rename',
    file: /^[0-9a-f]{16}\.wal\.tmp$/,
    env: { APPENDER_SNAPSHOTS: 'off' },
  },
  // The next directory fsync names a new segment, installs a snapshot or makes a compaction's deletes durable.
  { name: 'a directory fsync fails with EIO', points: ['posix/io/sync/fsync'], errno: 5, code: 'EIO', syscall: 'fsync', file: /^-$/ },
  // The next unlink drops a snapshot beyond the two kept, or a compacted segment.
  {
    name: 'an unlink during compaction fails with EIO',
    points: ['posix/io/dir/unlink'],
    errno: 5,
    code: 'EIO',
    syscall: 'unlink',
    file: /^(snap-[0-9a-f]{16}\.snap|[0-9a-f]{16}\.wal)$/,
  },
  // Segments of 4 MiB: no roll before the next snapshot, so its install is the next rename.
  {
    name: 'the rename installing a snapshot fails with ENOSPC',
    points: ['posix/io/dir/rename'],
    errno: 28,
    code: 'ENOSPC',
    syscall: 'rename',
    file: /^snap-[0-9a-f]{16}\.snap\.tmp$/,
    segmentBytes: 4 * 1024 * 1024,
  },
];

describe('disk faults at process level (fiu-run, each fault fires once; needs Debian fiu-utils)', () => {
  itFiu.each(faultCases)(
    '$name: the child exits 1 and a restart recovers everything acknowledged',
    async (c) => {
      const tools = fiuTools();
      const slug = c.name.replace(/[^a-z]+/gi, '-');
      const dir = path.join(tmp, `fault-${slug}`);
      const ctl = path.join(tmp, `fiu-ctl-${slug}`);
      const env = { UV_USE_IO_URING: '0', ...c.env };
      const { child } = await startAppender(dir, 0, [tools.run, '-x', '-f', ctl], env, c.segmentBytes);
      const pid = Number((await child.waitFor(/^pid /)).slice(4));
      // Armed once the spare segment is in place and a good number of saves are acknowledged.
      await child.waitFor(/^renamed 0000000000000002\.wal$/);
      await child.waitFor(/^synced 500$/);
      const commands = c.points.flatMap((p) => ['-c', `enable name=${p},failinfo=${c.errno},onetime`]);
      execFileSync(tools.ctrl, [...commands, '-f', ctl, String(pid)]);
      const synced = await expectCleanCrash(child, c.code, c.syscall, c.file);
      const failedFile = child.lines.find((l) => l.startsWith('fatal '))!.split(' ')[3]!;
      // Without the fault, a restart finds everything acknowledged, intact, removes a half-made file, and appends again.
      const again = await startAppender(dir, synced.at(-1)!, [], {}, c.segmentBytes);
      const report = JSON.parse((await again.child.waitFor(/^recovery /)).slice('recovery '.length)) as { deleted: string[] };
      if (c.syscall === 'rename') expect(report.deleted).toContain(failedFile);
      await again.child.waitFor(/^synced /);
      again.child.proc.kill('SIGKILL');
      await again.child.exited;
    },
    60_000,
  );
});

if (fiuMissing !== null) {
  const what = ci ? 'the fault tests fail (CI is set)' : 'the fault tests are skipped (CI installs it)';
  console.warn(`process.spec: ${fiuMissing}; ${what}.`);
}

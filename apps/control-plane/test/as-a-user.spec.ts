/**
 * Goal: the control plane as a user meets it. In the local fleet `npm start` runs
 * (2 cells, 1 router, 2 proxies, 1 control plane), `fencer tenants create
 * payments --cell cell-2` then `fencer lock /ls/payments/x -- true` through
 * the router puts the lock on cell-2, which cell-2's own replicas confirm
 * and `fencer fleet status` shows; a lock in a namespace nobody created
 * makes the router create its tenant on the least-loaded cell (auto-tenants),
 * and the control plane lists it; SIGTERM to the launcher stops every
 * process it started.
 * Method: tools/fleet/launch.mjs itself (what `npm start` runs after its
 * build), 3 replicas per cell, on a free port block and a temporary data
 * directory, awaited until it prints "Ctrl-C stops the fleet". The CLI runs
 * as its own process (the `fencer` bin) from that directory, finding
 * .fencer/fleet.json as a user's shell would. While a lock is held (the
 * command under `fencer lock` prints a line, then waits for one on stdin),
 * the test asks cell-2's and cell-1's leaders directly with GetLock.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { waitForLeader, type CellPlan } from '@fencer/fleet';
import { freeFleetPortBase } from '@fencer/fleet/testing';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const LAUNCHER = path.join(root, 'tools/fleet/launch.mjs');
const FENCER = path.join(root, 'node_modules/.bin/fencer');

interface FleetJson {
  lockService: string[];
  controlPlane?: { urls: string[] };
  routers: { id: string; pid: number }[];
  proxies: { id: string; pid: number }[];
  cells: CellPlan[];
}

let dir = '';
let launcher: ChildProcess | undefined;
let launcherOut = '';
let fleet: FleetJson;

/** Resolves when `probe()` holds, checked on every chunk of output; rejects when the process exits first or at the deadline. */
function untilOutput(
  child: ChildProcess,
  text: () => string,
  probe: (t: string) => boolean,
  what: string,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error): void => {
      clearTimeout(timer);
      child.stdout?.off('data', check);
      child.stderr?.off('data', check);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve();
    };
    const check = (): void => {
      if (probe(text())) done();
    };
    const onExit = (code: number | null, signal: string | null): void =>
      done(new Error(`${what}: the process exited (${signal ?? code}) first; output:\n${text()}`));
    const timer = setTimeout(() => done(new Error(`${what} did not happen within ${timeoutMs} ms; output:\n${text()}`)), timeoutMs);
    child.stdout?.on('data', check);
    child.stderr?.on('data', check);
    child.once('exit', onExit);
    check();
  });
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-as-a-user-'));
  const portBase = await freeFleetPortBase(2, 3, 1, 2, 1);
  const args = [
    '--cells',
    '2',
    '--replicas',
    '3',
    '--routers',
    '1',
    '--proxies',
    '2',
    '--control-planes',
    '1',
    '--port-base',
    String(portBase),
    '--data-dir',
    path.join(dir, '.fencer'),
  ];
  launcher = spawn(process.execPath, [LAUNCHER, ...args], {
    cwd: root,
    env: { ...process.env, FENCER_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  launcher.stdout!.on('data', (d: Buffer) => void (launcherOut += d.toString()));
  launcher.stderr!.on('data', (d: Buffer) => void (launcherOut += d.toString()));
  await untilOutput(
    launcher,
    () => launcherOut,
    (t) => t.includes('Ctrl-C stops the fleet'),
    'the fleet coming up',
    240_000,
  );
  fleet = JSON.parse(readFileSync(path.join(dir, '.fencer', 'fleet.json'), 'utf8')) as FleetJson;
}, 300_000);

afterAll(async () => {
  if (launcher && launcher.exitCode === null && launcher.signalCode === null) {
    const gone = new Promise((r) => launcher!.once('exit', r));
    launcher.kill('SIGKILL');
    await gone;
  }
  // Only after a failed test: the launcher's children outlive a SIGKILLed launcher.
  for (const pid of fleetPids()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  if (dir && !process.env['FENCER_KEEP_TEST_DATA']) rmSync(dir, { recursive: true, force: true });
}, 60_000);

function fleetPids(): number[] {
  if (!fleet) return [];
  const cp = (fleet as unknown as { controlPlane?: { instances?: { pid: number }[] } }).controlPlane?.instances ?? [];
  return [
    ...fleet.cells.flatMap((c) => c.replicas.map((r) => r.pid)),
    ...fleet.routers.map((r) => r.pid),
    ...fleet.proxies.map((p) => p.pid),
    ...cp.map((c) => c.pid),
  ].filter((p) => p > 0);
}

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** `fencer …` as its own process in the fleet's directory; `held` is called once its stdout shows `heldLine`. */
function fencer(args: string[], opts: { heldLine?: string; held?: (child: ChildProcess) => Promise<void> } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    // Only fleet.json tells the CLI where things are, as in a user's fresh shell.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !['FENCER_CONTROL_PLANE', 'FENCER_ENDPOINTS', 'FENCER_PROXIES', 'FENCER_FLEET', 'FENCER_TOKEN'].includes(k),
      ),
    );
    const child = spawn(process.execPath, [FENCER, ...args], { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let heldSeen = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (opts.heldLine && opts.held && !heldSeen && out.includes(opts.heldLine)) {
        heldSeen = true;
        opts.held(child).then(
          () => child.stdin.end('release\n'),
          (e: unknown) => {
            child.stdin.end('release\n');
            reject(e);
          },
        );
      }
    });
    child.stderr.on('data', (d: Buffer) => void (err += d.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
    if (!opts.heldLine) child.stdin.end();
  });
}

/** A lock-service client on a cell's leader, asked directly (not through the router). */
async function leaderClient(cellId: string): Promise<InstanceType<typeof lockservice.LockServiceClient>> {
  const cell = fleet.cells.find((c) => c.id === cellId)!;
  const leader = await waitForLeader(cell.replicas, 30_000);
  return new lockservice.LockServiceClient(cell.replicas.find((r) => r.id === leader.nodeId)!.grpc, credentials.createInsecure());
}

/** GetLock on a cell's leader: the lock's holders, or the refusal's lock-reason. */
async function getLockOnCell(cellId: string, name: string): Promise<{ holders?: { sessionId: string }[]; reason?: string }> {
  const client = await leaderClient(cellId);
  return new Promise((resolve) =>
    client.getLock(
      { name },
      new Metadata(),
      { deadline: Date.now() + 10_000 },
      (e: ServiceError | null, res?: { lock?: { holders?: { sessionId: string }[] } }) => {
        client.close();
        resolve(e ? { reason: String(e.metadata?.get('lock-reason')[0] ?? e.details) } : { holders: res?.lock?.holders ?? [] });
      },
    ),
  );
}

/** OpenSession in a namespace on a cell's leader: whether the cell owns it (a session opens) or its refusal's lock-reason. */
async function openSessionOnCell(cellId: string, namespace: string): Promise<{ sessionId?: string; reason?: string }> {
  const client = await leaderClient(cellId);
  return new Promise((resolve) =>
    client.openSession(
      { clientId: 'as-a-user-test', ttlMs: 5_000, namespace },
      new Metadata(),
      { deadline: Date.now() + 10_000 },
      (e: ServiceError | null, res?: { sessionId: string }) => {
        client.close();
        resolve(e ? { reason: String(e.metadata?.get('lock-reason')[0] ?? e.details) } : { sessionId: res!.sessionId });
      },
    ),
  );
}

/** A command for `fencer lock … --`: prints a line while the lock is held, then waits for one on stdin. */
const HOLD = [process.execPath, '-e', "process.stdout.write('holding\\n'); process.stdin.once('data', () => process.exit(0));"];

describe('the local fleet with a control plane, as a user would use it', () => {
  it('writes the control plane into fleet.json and prints its URL', () => {
    expect(fleet.controlPlane?.urls).toHaveLength(1);
    expect(launcherOut).toContain(`control plane: ${fleet.controlPlane!.urls[0]}`);
    expect(fleet.lockService).toHaveLength(1);
    // "Ctrl-C stops the fleet" is what tools/readme-check waits for: the last line.
    expect(launcherOut.trimEnd().endsWith('Ctrl-C stops the fleet.')).toBe(true);
  });

  it('creates payments on cell-2; a lock through the router lands on cell-2; fleet status shows it', async () => {
    const created = await fencer(['tenants', 'create', 'payments', '--cell', 'cell-2']);
    expect(created.err).toBe('');
    expect(created.code).toBe(0);
    expect(created.out).toMatch(/payments\s+cell-2\s+-\s+-\s+active/);

    const once = await fencer(['lock', '/ls/payments/x', '--', 'true']);
    expect(once.err).toMatch(/acquired \/ls\/payments\/x \(exclusive, token \d+, session payments:/);
    expect(once.code).toBe(0);

    let seen: {
      cell2?: { holders?: { sessionId: string }[]; reason?: string };
      cell1?: { holders?: { sessionId: string }[]; reason?: string };
    } = {};
    const held = await fencer(['lock', '/ls/payments/x', '--', ...HOLD], {
      heldLine: 'holding',
      held: async () => {
        seen = { cell2: await getLockOnCell('cell-2', '/ls/payments/x'), cell1: await getLockOnCell('cell-1', '/ls/payments/x') };
      },
    });
    expect(held.code).toBe(0);
    const sessionId = /session (payments:[0-9a-f]+)/.exec(held.err)?.[1];
    expect(sessionId).toBeDefined();
    expect(seen.cell2?.holders?.map((h) => h.sessionId)).toEqual([sessionId]);
    expect(seen.cell1?.holders ?? []).toEqual([]);
    expect((await openSessionOnCell('cell-1', 'payments')).reason).toBe('NAMESPACE_NOT_HERE');

    const status = await fencer(['fleet', 'status']);
    expect(status.code).toBe(0);
    expect(status.out).toMatch(/\ncell-2: payments\n/);
    expect(status.out).toMatch(/cell-2\s+cell-2-r\d\s+\S+\s+leader/);
    expect(status.out).toMatch(/cell-1\s+cell-1-r\d\s+\S+\s+leader/);
  }, 180_000);

  it('auto-creates the tenant of an unknown namespace on the least-loaded cell, and the control plane lists it', async () => {
    const before = await fencer(['--json', 'tenants', 'list']);
    expect(JSON.parse(before.out).tenants.map((t: { namespace: string }) => t.namespace)).not.toContain('newcomer');

    const locked = await fencer(['lock', '/ls/newcomer/y', '--', 'true']);
    expect(locked.err).toMatch(/acquired \/ls\/newcomer\/y/);
    expect(locked.code).toBe(0);

    // Placement takes the fewest live sessions, then the fewest tenants: only
    // payments sessions were ever opened (on cell-2), and cell-2 holds the one
    // tenant, so cell-1 is the least loaded either way.
    const listed = await fencer(['--json', 'tenants', 'list']);
    const tenants = JSON.parse(listed.out).tenants as { namespace: string; cell: string }[];
    expect(tenants.find((t) => t.namespace === 'newcomer')?.cell).toBe('cell-1');
    const table = await fencer(['tenants', 'list']);
    expect(table.out).toMatch(/newcomer\s+cell-1/);
    // cell-1 owns it (a session opens there), cell-2 refuses it.
    expect((await openSessionOnCell('cell-1', 'newcomer')).sessionId).toMatch(/^newcomer:/);
    expect((await openSessionOnCell('cell-2', 'newcomer')).reason).toBe('NAMESPACE_NOT_HERE');
  }, 180_000);

  it('stops every process it started on SIGTERM', async () => {
    const pids = fleetPids();
    expect(pids.length).toBe(2 * 3 + 1 + 2 + 1);
    const exited = new Promise<number | null>((r) => launcher!.once('exit', (code) => r(code)));
    launcher!.kill('SIGTERM');
    expect(await exited).toBe(0);
    const alive = pids.filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    expect(alive).toEqual([]);
  }, 60_000);
});

/**
 * Goal: docs/operations.md's "Add or replace a replica" works as written,
 * end to end, with no process restarted by hand: the new replica started
 * with --join, `fencer cell add-member ID ADDRESS --learner --cell cell-1`,
 * `fencer cell status --cell cell-1` until its lag is 0, `fencer cell
 * promote`, `fencer cell remove-member` of the replica it replaces. The
 * replaced replica is the cell's leader (the hard case: it must hand over
 * and leave). Throughout, SDK clients take locks and one lock stays held:
 * no call fails beyond its retries, the held lock keeps its token, tokens
 * keep growing; at the end the cell is the two old replicas and the new
 * one, all voters, the new one caught up, every original process still the
 * same PID.
 * Method: a three-replica test cell (tools/fleet) on 127.0.0.1; the fourth
 * replica is planned in the cell's own port block; every `fencer` command
 * runs in-process (runCli) with FENCER_ADMIN_ENDPOINTS naming all four
 * admin ports.
 */
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT, runCli, type CliIo } from '@fencer/cli';
import { FencerClient, type LockHandle } from '@fencer/client';
import { adminClient, spawnReplica, status, stopAll, type ReplicaPlan } from '@fencer/fleet';
import { startTestCell, type TestCell } from '@fencer/fleet/testing';
import { LockLoad, answersOk, until } from './rolling.js';

const NEW_ID = 'cell-1-r4';
/** The new replica's place in the cell's port block (tools/fleet reserves nine per cell). */
const NEW_INDEX = 4;
const STEP_TIMEOUT_MS = 60_000;

let cell: TestCell;
let joiner: ChildProcess | undefined;
let client: FencerClient | undefined;
let loadClient: FencerClient | undefined;
let load: LockLoad | undefined;

beforeAll(async () => {
  cell = await startTestCell({ replicas: 3 });
}, 240_000);

afterAll(async () => {
  await load?.stop();
  await client?.close();
  await loadClient?.close();
  if (joiner) await stopAll([joiner]);
  await cell?.stop();
});

/** The plan of a replica that joins the cell: the first replica's command line with its own id, ports, folder and --join. */
function planNewReplica(): ReplicaPlan {
  const base = cell.replicas[0]!;
  const host = base.grpc.split(':')[0]!;
  const port = Number(base.grpc.split(':')[1]) - 1 + NEW_INDEX;
  const grpc = `${host}:${port}`;
  const argv = [...base.argv];
  const set = (flag: string, value: string): void => {
    argv[argv.indexOf(flag) + 1] = value;
  };
  const dataDir = path.join(cell.dataDir, NEW_ID);
  set('--id', NEW_ID);
  set('--listen', grpc);
  set('--admin-listen', `${host}:${port + 100}`);
  set('--metrics-listen', `${host}:${port + 200}`);
  set('--peer-listen', `${host}:${port + 300}`);
  set('--peers', [...cell.replicas.map((r) => `${r.id}=${r.grpc}`), `${NEW_ID}=${grpc}`].join(','));
  set('--data-dir', dataDir);
  argv.push('--join');
  return {
    ...base,
    id: NEW_ID,
    grpc,
    admin: `${host}:${port + 100}`,
    peer: `${host}:${port + 300}`,
    metrics: `http://${host}:${port + 200}/metrics`,
    argv,
    dataDir,
  };
}

async function fencer(args: string[], adminEndpoints: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    env: { ...process.env, FENCER_ADMIN_ENDPOINTS: adminEndpoints.join(',') },
    cwd: cell.dataDir,
  };
  const code = await runCli(args, io);
  return { code, out, err };
}

interface StatusRow {
  id: string;
  role: string | null;
  lag: number | null;
  appliedIndex: number | null;
  commitIndex: number | null;
}

describe('the add-or-replace-a-replica runbook', () => {
  it('replaces the leader with a new replica using only the commands it quotes, under load and without a restart', async () => {
    const pids = new Map(cell.replicas.map((r) => [r.id, cell.children.get(r.id)!.pid]));
    client = new FencerClient({ endpoints: cell.endpoints });
    loadClient = new FencerClient({ endpoints: cell.endpoints });
    const held: LockHandle = await client.acquire('/ls/replace/held');
    load = new LockLoad([loadClient], ['/ls/replace/a', '/ls/replace/b']);
    load.start(2);
    await load.progressed(5, STEP_TIMEOUT_MS);
    const replaced = (await cell.leader()).nodeId;

    const plan = planNewReplica();
    joiner = spawnReplica(plan, { logDir: path.join(cell.dataDir, 'logs') });
    await until(() => answersOk(plan.metrics.replace(/\/metrics$/, '/livez')), STEP_TIMEOUT_MS, `${NEW_ID} serving`);
    const admins = [...cell.replicas.map((r) => r.admin), plan.admin];

    const added = await fencer(['cell', 'add-member', NEW_ID, plan.grpc, '--learner', '--cell', 'cell-1'], admins);
    expect(added, 'add-member').toMatchObject({ code: EXIT.OK, err: '' });
    // "wait until `cell status` shows its lag near 0"
    const caughtUp = await until(
      async () => {
        const r = await fencer(['--json', 'cell', 'status', '--cell', 'cell-1'], admins);
        const row = (JSON.parse(r.out) as { replicas: StatusRow[] }).replicas.find((x) => x.id === NEW_ID);
        return row?.lag === 0 && row.role === 'follower' ? row : undefined;
      },
      STEP_TIMEOUT_MS,
      `cell status showing ${NEW_ID} caught up`,
    );
    expect(caughtUp.appliedIndex).toBeGreaterThan(0);
    await load.progressed(5, STEP_TIMEOUT_MS);

    expect(await fencer(['cell', 'promote', NEW_ID, '--cell', 'cell-1'], admins), 'promote').toMatchObject({ code: EXIT.OK, err: '' });
    await load.progressed(5, STEP_TIMEOUT_MS);
    const removed = await fencer(['cell', 'remove-member', replaced, '--cell', 'cell-1'], admins);
    expect(removed, `remove-member ${replaced}`).toMatchObject({ code: EXIT.OK, err: '' });

    // The cell without the replaced replica: a leader among the rest, which lists the new one as a voter.
    const rest = [...cell.replicas.filter((r) => r.id !== replaced).map((r) => r.id), NEW_ID];
    const leader = await until(
      async () => {
        const st = await Promise.all(rest.map((id) => (id === NEW_ID ? statusOfNew(plan) : cell.statusOf(id))));
        const l = st.find((s) => s?.role === 'leader');
        return l && !l.members.some((m) => m.id === replaced) && l.members.every((m) => m.voter) ? l : undefined;
      },
      STEP_TIMEOUT_MS,
      `a leader without ${replaced}`,
    );
    expect(leader.members.map((m) => m.id).sort()).toEqual(rest.sort());
    await load.progressed(10, STEP_TIMEOUT_MS);
    await load.stop();
    // The replaced replica is decommissioned only now: its leaving was the membership change, not this.
    await cell.kill(replaced, 'SIGTERM');

    const applied = await until(
      async () => {
        const s = await statusOfNew(plan);
        return s && s.appliedIndex >= leader.commitIndex ? s : undefined;
      },
      STEP_TIMEOUT_MS,
      `${NEW_ID} applying the leader's log`,
    );
    expect(applied.role === 'leader' || applied.leaderId === leader.nodeId).toBe(true);
    expect(load.failures, 'client calls that failed beyond their retries').toEqual([]);
    expect(load.tokensNotGrowing()).toEqual([]);
    expect(held.held && !held.signal.aborted, 'the lock held throughout').toBe(true);
    expect((await client.getLock('/ls/replace/held')).lock.holders.map((h) => h.token)).toEqual([held.token]);
    for (const r of cell.replicas.filter((x) => x.id !== replaced))
      expect(cell.children.get(r.id)!.pid, `${r.id} never restarted`).toBe(pids.get(r.id));
    expect([joiner.exitCode, joiner.signalCode], `${NEW_ID} never restarted`).toEqual([null, null]);
  }, 300_000);
});

/** Admin Status of the new replica (the test cell's statusOf knows only its own replicas). */
async function statusOfNew(plan: ReplicaPlan): ReturnType<typeof status> {
  const c = adminClient(plan.admin);
  try {
    return await status(c, 1_000);
  } finally {
    c.close();
  }
}

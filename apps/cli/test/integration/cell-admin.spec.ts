/**
 * Goal: the cell's admin operations from the command line, against a real
 * three-replica cell: `fencer cell transfer-leader` moves leadership,
 * `add-member` / `remove-member` change membership through whichever replica
 * leads, `snapshot` takes one on the leader, bad input gets a reason and
 * exit 1, and no reachable leader gets exit 69 once --timeout has passed.
 * Method: tools/fleet starts apps/cell-node three times on free loopback
 * ports; runCli runs in-process with FENCER_ADMIN_ENDPOINTS; results are
 * checked through the admin Status of the replicas.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT, runCli, type CliIo } from '../../src/index.js';
import { startCell, type Cell } from './cell.js';

let cell: Cell;

beforeAll(async () => {
  cell = await startCell({ replicas: 3 });
}, 240_000);

afterAll(async () => {
  await cell?.stop();
});

async function fencer(
  args: string[],
  admin = cell.replicas.map((r) => r.admin).join(','),
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    env: { ...process.env, FENCER_ADMIN_ENDPOINTS: admin },
    cwd: process.cwd(),
  };
  const code = await runCli(args, io);
  return { code, out, err };
}

async function members(): Promise<string[]> {
  const leader = await cell.leader();
  const st = await cell.statusOf(leader.nodeId);
  return st!.members.map((m: { id: string }) => m.id).sort();
}

describe('fencer cell admin operations', () => {
  it('transfer-leader hands leadership to the named voter', async () => {
    const before = (await cell.leader()).nodeId;
    const to = cell.replicas.find((r) => r.id !== before)!.id;
    const r = await fencer(['--json', 'cell', 'transfer-leader', to]);
    expect(r.err).toBe('');
    expect(r.code).toBe(EXIT.OK);
    expect(JSON.parse(r.out)).toEqual({ from: before, leaderId: to });
    expect((await cell.leader()).nodeId).toBe(to);
  });

  it('add-member and remove-member change membership through the leader, wherever it is', async () => {
    const added = await fencer(['cell', 'add-member', 'spare-1', '127.0.0.1:9', '--learner', '--peer-address', '127.0.0.1:10']);
    expect(added.err).toBe('');
    expect(added.code).toBe(EXIT.OK);
    expect(added.out).toMatch(/^added spare-1 at 127\.0\.0\.1:9 as a learner \(membership change at index \d+, by cell-1-r\d\)\n$/);
    expect(await members()).toContain('spare-1');
    const leader = await cell.leader();
    const st = await cell.statusOf(leader.nodeId);
    expect(st!.members.find((m: { id: string }) => m.id === 'spare-1')).toMatchObject({
      voter: false,
      address: '127.0.0.1:9',
      peerAddress: '127.0.0.1:10',
    });

    const removed = await fencer(['--json', 'cell', 'remove-member', 'spare-1']);
    expect(removed.code).toBe(EXIT.OK);
    expect(JSON.parse(removed.out)).toMatchObject({ member: 'spare-1', index: expect.any(Number) });
    expect(await members()).toEqual(cell.replicas.map((r) => r.id).sort());
  });

  it('snapshot takes one on the leader and says where', async () => {
    const r = await fencer(['--json', 'cell', 'snapshot']);
    expect(r.code).toBe(EXIT.OK);
    const answer = JSON.parse(r.out) as { replica: string; index: number; bytes: number };
    expect(answer.replica).toBe((await cell.leader()).nodeId);
    expect(answer.index).toBeGreaterThan(0);
    expect(answer.bytes).toBeGreaterThan(0);
  });

  it('refuses bad input with the reason and exit 1', async () => {
    const r = await fencer(['cell', 'add-member', 'has space', '127.0.0.1:9']);
    expect(r.code).toBe(EXIT.ERROR);
    expect(r.err).toMatch(/a member id is 1-128 characters of \[A-Za-z0-9._-\] \(INVALID_ARGUMENT\)/);
    const promote = await fencer(['cell', 'promote', 'nobody']);
    expect(promote.code).toBe(EXIT.ERROR);
    expect(promote.err).toMatch(/nobody is not a learner of this cell/);
  });

  it('gives up with exit 69 when no leader answers within --timeout', async () => {
    const r = await fencer(['--timeout', '1s', 'cell', 'transfer-leader'], '127.0.0.1:9');
    expect(r.code).toBe(EXIT.UNAVAILABLE);
    expect(r.err).toMatch(/no replica among 127\.0\.0\.1:9 says it leads/);
  });
});

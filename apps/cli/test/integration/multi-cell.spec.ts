/**
 * Goal: `fencer cell …` on a fleet of several cells, as a new user meets it:
 * status prints one table per cell, each with its own leader and every
 * replica's lag (none "?"); --cell shows one cell; a change without --cell
 * on endpoints that span cells is refused with exit 64 naming the cells; with
 * --cell, transfer-leader moves that cell's leadership and leaves the other's
 * alone; a --cell no replica belongs to is exit 64 too.
 * Method: @fencer/fleet starts two cells of three cell-node processes on
 * 127.0.0.1 (no routers or proxies); runCli in-process is given all six
 * admin addresses by FENCER_ADMIN_ENDPOINTS, so each replica's cell comes
 * from its own Status answer, not from a fleet description.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';
import { EXIT, runCli, type CliIo } from '../../src/index.js';

let fleet: TestFleet;

beforeAll(async () => {
  fleet = await startTestFleet({ cells: 2, replicas: 3, routers: 0, proxies: 0 });
  await fleet.leaderOf('cell-1', 60_000);
  await fleet.leaderOf('cell-2', 60_000);
}, 180_000);

afterAll(async () => {
  await fleet?.stop();
});

async function fencer(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const admin = fleet.plan.flatMap((c) => c.replicas.map((r) => r.admin)).join(',');
  const io: CliIo = {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    env: { ...process.env, FENCER_ADMIN_ENDPOINTS: admin },
    cwd: process.cwd(),
  };
  const code = await runCli(args, io);
  return { code, out, err };
}

describe('fencer cell on a fleet of two cells', () => {
  it('status prints one table per cell, each with its leader and every lag known', async () => {
    const r = await fencer(['cell', 'status']);
    expect(r.code).toBe(EXIT.OK);
    const tables = r.out.trim().split('\n\n');
    expect(tables).toHaveLength(2);
    for (const [i, cell] of ['cell-1', 'cell-2'].entries()) {
      const lines = tables[i]!.split('\n');
      expect(lines[0]).toMatch(new RegExp(`^cell ${cell}  leader ${cell}-r\\d \\(term \\d+\\)$`));
      expect(lines.slice(2)).toHaveLength(3);
      for (const row of lines.slice(2))
        expect(row).toMatch(new RegExp(`^${cell}-r\\d\\s+(leader|follower)\\s+\\d+\\s+\\d+\\s+\\d+\\s+\\d+\\s+\\d+$`));
    }
    const json = JSON.parse((await fencer(['--json', 'cell', 'status', '--cell', 'cell-2'])).out);
    expect(json.cells.map((c: { cellId: string }) => c.cellId)).toEqual(['cell-2']);
    expect(json.replicas.map((x: { id: string }) => x.id).sort()).toEqual(['cell-2-r1', 'cell-2-r2', 'cell-2-r3']);
    expect(json.leaderId).toMatch(/^cell-2-r\d$/);
  }, 60_000);

  it('a change without --cell is refused, naming the cells; an unknown --cell too', async () => {
    const r = await fencer(['cell', 'transfer-leader']);
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).toBe('fencer: the admin endpoints span cells cell-1, cell-2: name the one to change with --cell ID\n');
    const unknown = await fencer(['cell', 'status', '--cell', 'cell-9']);
    expect(unknown.code).toBe(EXIT.USAGE);
    expect(unknown.err).toBe('fencer: no replica of cell cell-9 among the admin endpoints (their cells: cell-1, cell-2)\n');
  }, 60_000);

  it('transfer-leader --cell moves that cell’s leadership and leaves the other’s', async () => {
    const before1 = await fleet.leaderOf('cell-1');
    const before2 = await fleet.leaderOf('cell-2');
    const r = await fencer(['--json', 'cell', 'transfer-leader', '--cell', 'cell-2']);
    expect(r.code, r.err).toBe(EXIT.OK);
    const answer = JSON.parse(r.out) as { from: string; leaderId: string };
    expect(answer.from).toBe(before2.nodeId);
    expect(answer.leaderId).toMatch(/^cell-2-r\d$/);
    expect(answer.leaderId).not.toBe(before2.nodeId);
    expect((await fleet.leaderOf('cell-2')).nodeId).toBe(answer.leaderId);
    const after1 = await fleet.leaderOf('cell-1');
    expect([after1.nodeId, after1.term]).toEqual([before1.nodeId, before1.term]);
  }, 60_000);
});

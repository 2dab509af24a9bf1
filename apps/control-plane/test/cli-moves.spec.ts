/**
 * Goal: `fencer tenants move NS --to CELL [--wait]` and `fencer moves
 * list|get` drive the move journal as an operator would: --wait prints each
 * state the move reaches with what it carried and exits 0 at done (non-zero
 * at failed); list and get show the contract's Move, as a table or JSON.
 * Method: the real app (one-member meta group, fake cells) on 127.0.0.1
 * port 0 with the real move worker on a LeaderLoop, and the `fencer` bin as
 * its own process.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaderLoop, moveWorker } from '../src/index.js';
import { startHarness, type Harness } from './support/harness.js';
import { root } from './support/instances.js';

const FENCER = path.join(root, 'node_modules/.bin/fencer');
const runTimeoutMs = 20_000;

let h: Harness;
let loop: LeaderLoop;
let url = '';
beforeAll(async () => {
  h = await startHarness({ cells: ['cell-1', 'cell-2'] });
  const logger = pino({ level: 'silent' });
  loop = new LeaderLoop(
    h.group,
    [
      {
        ...moveWorker({ meta: h.group, term: () => h.group.replica.status().term, cells: h.cells, logger, wallMs: () => Date.now() }),
        intervalMs: 50,
      },
    ],
    logger,
  );
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  loop?.close();
  await h?.close();
});

function fencer(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [FENCER, '--timeout', '5s', ...args, '--control-plane', url],
      { env: {}, timeout: runTimeoutMs },
      (error, out, err) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, out, err });
      },
    );
  });
}

describe('fencer tenants move / moves', () => {
  it('moves a tenant with --wait, printing each state, then lists and gets the move', async () => {
    expect((await fencer(['tenants', 'create', 'pay', '--cell', 'cell-1'])).code).toBe(0);
    h.cells.owned.get('cell-1')!.set('pay', 4);
    const r = await fencer(['tenants', 'move', 'pay', '--to', 'cell-2', '--wait']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/s {2}queued {2}sessions - {2}locks -\n/);
    expect(r.out).toMatch(/s {2}done {2}sessions 4 {2}locks 8\n/);
    expect(r.out).toMatch(/ID\s+NAMESPACE\s+FROM\s+TO\s+STATE\s+SESSIONS\s+LOCKS\s+UNAVAILABLE\s+CREATED\n/);
    expect(r.out).toMatch(/pay\s+cell-1\s+cell-2\s+done\s+4\s+8\s+\d+ms/);

    const list = await fencer(['--json', 'moves', 'list']);
    const moves = JSON.parse(list.out).moves as { id: string; state: string; sessions: number }[];
    expect(moves).toHaveLength(1);
    expect(moves[0]).toMatchObject({ namespace: 'pay', state: 'done', sessions: 4, locks: 8, revision: 42 });
    const get = await fencer(['moves', 'get', moves[0]!.id]);
    expect(get.code).toBe(0);
    expect(get.out).toMatch(/pay\s+cell-1\s+cell-2\s+done/);
  });

  it('exits non-zero with the reason when the move fails, and on a refused start', async () => {
    expect((await fencer(['tenants', 'create', 'huge', '--cell', 'cell-1'])).code).toBe(0);
    h.cells.owned.get('cell-1')!.set('huge', 100);
    h.cells.importBytesMax = 10;
    const r = await fencer(['tenants', 'move', 'huge', '--to', 'cell-2', '--wait']);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/failed: .*exceeds what the target cell imports/);
    const there = await fencer(['tenants', 'move', 'pay', '--to', 'cell-2']);
    expect(there.code).not.toBe(0);
    expect(there.err).toMatch(/ALREADY_THERE/);
    const missing = await fencer(['moves', 'get', 'nope']);
    expect(missing.err).toMatch(/MOVE_NOT_FOUND/);
  });
});

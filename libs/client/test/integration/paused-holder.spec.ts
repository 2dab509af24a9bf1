/**
 * Goal: fencing makes a PostgreSQL table safe against a holder that pauses
 * past its lease — the failure a lock alone cannot prevent. Holder A (a
 * separate process using the client) takes the lock, checks its signal (all
 * clear) and is then SIGSTOPped before its write; its session expires; holder
 * B takes the lock and writes through the fence; A resumes and writes with
 * its old token. A's write must be rejected and B's data intact. The same
 * run without the fence check must show the lost update — proof that the
 * test can fail.
 * Method: a private PostgreSQL (initdb in a temp dir, psql via child
 * processes) and the conditional UPDATE from fencedUpdate(); the lock
 * service is the fake with auto-expiry here (the real five-replica cell's
 * variant lives with the cell integration tests).
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencerClient, fencedUpdate } from '../../src/index.js';
import { FakeLockService } from '../../src/testing/index.js';
import { HolderProcess } from './holder-process.js';
import { startPostgres, type Postgres } from './postgres.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const TTL_MS = 2_000;

let pg: Postgres;
let fake: FakeLockService;

beforeAll(async () => {
  // The holder process runs the compiled client (Node 20 cannot run .ts): build it (nx caches the result).
  execFileSync(path.join(root, 'node_modules/.bin/nx'), ['build', 'client', '--output-style=static'], { cwd: root, stdio: 'pipe' });
  pg = await startPostgres();
  fake = await FakeLockService.start({ autoExpire: true });
}, 180_000);

afterAll(async () => {
  await fake?.stop();
  await pg?.stop();
});

async function pausedHolderRun(fenced: boolean, lockName: string): Promise<{ tokenA: number; tokenB: number; rowsA: number; row: string }> {
  await pg.psql(`DROP TABLE IF EXISTS accounts; CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL DEFAULT 0); INSERT INTO accounts VALUES (1, 'nobody', 0);`);
  const a = new HolderProcess({ ENDPOINTS: fake.address, LOCK_NAME: lockName, TTL_MS: String(TTL_MS), PSQL: pg.psqlPath, PG_PORT: String(pg.port), WHO: 'A', FENCED: fenced ? '1' : '0' });
  const b = new FencerClient({ endpoints: [fake.address], ttlMs: TTL_MS, clientId: 'holder-B' });
  try {
    const tokenA = (await a.next('acquired')).token as number;
    a.send('check');
    expect((await a.next('checked')).aborted).toBe(false); // A believes it may write…
    a.pause(); // …and stops right there, past its TTL.
    const lockB = await b.acquire(lockName, { waitMs: 20_000 }); // granted once the cell expires A's session
    expect(lockB.token).toBeGreaterThan(tokenA);
    const q = fencedUpdate({ table: 'accounts', id: 1, token: lockB.token, set: { owner: 'B' } });
    const bWrite = fenced ? `PREPARE w(text, bigint, int) AS ${q.text};\nEXECUTE w('B', ${lockB.token}, 1);\n` : `UPDATE accounts SET owner = 'B' WHERE id = 1;\n`;
    expect(await pg.psql(bWrite)).toMatch(/UPDATE 1/);
    a.resume();
    a.send('write'); // A wakes up and writes with its old token
    const rowsA = (await a.next('written')).rows as number;
    const row = (await pg.psql('SELECT owner, fence FROM accounts WHERE id = 1;')).trim();
    await lockB.release();
    return { tokenA, tokenB: lockB.token, rowsA, row };
  } finally {
    await a.kill();
    await b.close();
  }
}

describe('a paused holder against PostgreSQL', () => {
  it('with the fence: the stale write is rejected and B’s data is intact', async () => {
    const r = await pausedHolderRun(true, '/ls/pg/account-1');
    expect(r.rowsA).toBe(0);
    expect(r.row).toBe(`B|${r.tokenB}`);
  });

  it('without the fence check: the stale write lands — the lost update the fence prevents', async () => {
    const r = await pausedHolderRun(false, '/ls/pg/account-2');
    expect(r.rowsA).toBe(1);
    expect(r.row).toBe('A|0');
  });
});

/**
 * The paused-holder scenario, shared by the fake-service run
 * (paused-holder.spec.ts) and the real-cell run (cell.spec.ts): holder A (a
 * separate process) takes the lock, checks its signal, is SIGSTOPped before
 * its write; B takes the lock once the service expired A's session and
 * writes; A resumes and writes with its old token.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { FencerClient, fencedUpdate } from '../../src/index.js';
import { HolderProcess } from './holder-process.js';
import type { Postgres } from './postgres.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

/**
 * The holder process runs the compiled client (Node 20 cannot run .ts).
 * `nx test client` builds it first (the test target depends on build); a
 * bare `vitest run` builds it here when it is missing.
 */
export function buildClient(): void {
  if (existsSync(path.join(root, 'libs/client/dist/index.js'))) return;
  execFileSync(path.join(root, 'node_modules/.bin/nx'), ['build', 'client', '--output-style=static'], { cwd: root, stdio: 'pipe' });
}

export interface PausedHolderResult {
  tokenA: number;
  tokenB: number;
  /** Rows A's late write changed. */
  rowsA: number;
  /** "owner|fence" of the row afterwards. */
  row: string;
}

export async function pausedHolderRun(
  pg: Postgres,
  endpoints: readonly string[],
  ttlMs: number,
  fenced: boolean,
  lockName: string,
): Promise<PausedHolderResult> {
  await pg.psql(
    `DROP TABLE IF EXISTS accounts; CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL DEFAULT 0); INSERT INTO accounts VALUES (1, 'nobody', 0);`,
  );
  const a = new HolderProcess({
    ENDPOINTS: endpoints.join(','),
    LOCK_NAME: lockName,
    TTL_MS: String(ttlMs),
    PSQL: pg.psqlPath,
    PG_PORT: String(pg.port),
    WHO: 'A',
    FENCED: fenced ? '1' : '0',
  });
  const b = new FencerClient({ endpoints: [...endpoints], ttlMs, clientId: 'holder-B' });
  try {
    const tokenA = (await a.next('acquired')).token as number;
    a.send('check');
    expect((await a.next('checked')).aborted).toBe(false); // A believes it may write…
    a.pause(); // …and stops right there, past its TTL.
    const lockB = await b.acquire(lockName, { waitMs: 60_000 }); // granted once the cell expires A's session
    expect(lockB.token).toBeGreaterThan(tokenA);
    const q = fencedUpdate({ table: 'accounts', id: 1, token: lockB.token, set: { owner: 'B' } });
    const bWrite = fenced
      ? `PREPARE w(text, bigint, int) AS ${q.text};\nEXECUTE w('B', ${lockB.token}, 1);\n`
      : `UPDATE accounts SET owner = 'B' WHERE id = 1;\n`;
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

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
 * service here is the fake with auto-expiry (cell.spec.ts runs the same
 * scenario against the real five-replica cell). Without the Debian
 * postgresql package the tests (named "needs Debian postgresql") skip and
 * say so; CI=true counts a skip as a failure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeLockService } from '../../src/testing/index.js';
import { buildClient, pausedHolderRun } from './paused-holder.js';
import { postgresBinDir, startPostgres, type Postgres } from './postgres.js';

const TTL_MS = 2_000;

const postgresMissing = postgresBinDir() === undefined;
if (postgresMissing) console.warn('paused-holder.spec: skipped: needs Debian postgresql (apt-get install postgresql); .ci/run installs it');

let pg: Postgres;
let fake: FakeLockService;

describe.skipIf(postgresMissing)('a paused holder against PostgreSQL (needs Debian postgresql)', () => {
  beforeAll(async () => {
    buildClient();
    pg = await startPostgres();
    fake = await FakeLockService.start({ autoExpire: true });
  }, 180_000);

  afterAll(async () => {
    await fake?.stop();
    await pg?.stop();
  });

  it('with the fence: the stale write is rejected and B’s data is intact', async () => {
    const r = await pausedHolderRun(pg, [fake.address], TTL_MS, true, '/ls/pg/account-1');
    expect(r.rowsA).toBe(0);
    expect(r.row).toBe(`B|${r.tokenB}`);
  });

  it('without the fence check: the stale write lands — the lost update the fence prevents', async () => {
    const r = await pausedHolderRun(pg, [fake.address], TTL_MS, false, '/ls/pg/account-2');
    expect(r.rowsA).toBe(1);
    expect(r.row).toBe('A|0');
  });
});

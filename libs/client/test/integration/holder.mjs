// Holder process for the paused-holder test: takes a lock with the real
// client, then obeys one-line commands on stdin and answers JSON lines:
//   check  → {event:'checked', aborted}   (the holder looks at its signal: all clear)
//   write  → {event:'written', rows}      (it writes its name with its token to PostgreSQL)
// The test SIGSTOPs this process between check and write: the classic pause
// between "I still hold the lock" and the write.
// Env: ENDPOINTS, LOCK_NAME, TTL_MS, PSQL, PG_PORT, WHO, FENCED ("1" or "0").
import { execFileSync } from 'node:child_process';
import readline from 'node:readline';
import { FencerClient, fencedUpdate } from '@fencer/client';

const env = process.env;
const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const client = new FencerClient({
  endpoints: env.ENDPOINTS.split(','),
  ttlMs: Number(env.TTL_MS),
  gracePeriodMs: 60_000,
  clientId: `holder-${env.WHO}`,
});
const lock = await client.acquire(env.LOCK_NAME, { waitMs: 10_000 });
out({ event: 'acquired', token: lock.token, sessionId: lock.session.id });

function writeSql(who, token) {
  if (env.FENCED === '1') {
    const q = fencedUpdate({ table: 'accounts', id: 1, token, set: { owner: who } });
    // q.values is [owner, token, id]; PREPARE gives the $n parameters their types.
    return `PREPARE w(text, bigint, int) AS ${q.text};\nEXECUTE w('${who}', ${token}, 1);\n`;
  }
  return `UPDATE "accounts" SET "owner" = '${who}' WHERE "id" = 1;\n`;
}

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  if (line === 'check') out({ event: 'checked', aborted: lock.signal.aborted });
  if (line === 'write') {
    const output = execFileSync(
      env.PSQL,
      ['-h', '127.0.0.1', '-p', env.PG_PORT, '-U', 'postgres', '-At', '-v', 'ON_ERROR_STOP=1', '-f', '-'],
      { input: writeSql(env.WHO, lock.token) },
    ).toString();
    const m = /UPDATE (\d+)/.exec(output);
    out({ event: 'written', rows: m ? Number(m[1]) : -1 });
  }
  if (line === 'exit') {
    await client.close().catch(() => {});
    process.exit(0);
  }
});

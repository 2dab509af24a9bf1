/**
 * Goal: a cell node survives structured fuzzing of its whole gRPC surface
 * (issue 29): requests generated from lockservice.proto and admin.proto with
 * fast-check (huge strings, boundary numbers, unknown enum values, unknown
 * fields, wrong wire types, truncated and random bytes, cancelled streams)
 * never get INTERNAL or UNKNOWN, never go unanswered, do not crash the
 * process or grow its RSS by 100 MiB, and a well-behaved client working
 * beside them keeps being served.
 * Method: a real one-replica cell (tools/fleet/test-cell.mjs). Requests are
 * sampled from a fixed seed (FENCER_FUZZ_SEED overrides it) and sent as raw
 * bytes, 64 at a time, to the lock service and the admin port; meanwhile a
 * client opens a session in its own namespace and acquires and releases in
 * a loop, and every one of its calls must succeed. RSS is read from /proc
 * after a warm-up batch and at the end. Admin calls that change membership
 * or take and stream whole snapshots (AddMember, RemoveMember,
 * PromoteLearner, TransferLeadership, TakeSnapshot, ReadSnapshot) are left
 * out: a valid one would change the cell under test rather than probe its
 * input handling, and they have their own tests. Then raw bytes on the
 * client port, one connection each: random bytes, the HTTP/2 preface with
 * frames that lie about their length or type, gRPC messages with lying
 * prefixes, the good client working beside them. Connections the node
 * leaves open are dropped by the fuzzer after 2 s and counted: at most 1%
 * (before the listener checked the HTTP/2 opening, about 18% stalled
 * mid-frame stayed open).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cell, startCell } from './support/cell.js';
import { describeTally, fuzz, fuzzRaw, methodsOf, rawClient, rssOf, tally } from '@fencer/fleet/fuzz';

/**
 * Requests per target (the lock service, the admin API) and raw payloads,
 * times FENCER_FUZZ_SCALE (default 1: issue 29's bar, which CI runs: with
 * the router's and the proxy's 30,000 in apps/cell-router/test/fuzz.spec.ts,
 * 50,000 structured requests, and 10,000 raw payloads on each port); a
 * quick local run lowers it (FENCER_FUZZ_SCALE=0.2).
 */
const SCALE = Number(process.env['FENCER_FUZZ_SCALE'] ?? 1);
const LOCK_REQUESTS = Math.round(Number(process.env['FENCER_FUZZ_LOCK_REQUESTS'] ?? 15_000 * SCALE));
const ADMIN_REQUESTS = Math.round(Number(process.env['FENCER_FUZZ_ADMIN_REQUESTS'] ?? 5_000 * SCALE));
/** Raw malformed HTTP/2 and protobuf payloads, each on its own connection. */
const RAW_PAYLOADS = Math.round(Number(process.env['FENCER_FUZZ_RAW_PAYLOADS'] ?? 10_000 * SCALE));
/**
 * Raw connections the node may leave open past the fuzzer's 2 s: its listener drops an HTTP/2 opening that is
 * malformed or late within 1 s (@fencer/service connection-guard.ts), so only a loaded machine's stragglers remain.
 */
const RAW_HELD_FRACTION_MAX = 0.01;
const SEED = Number(process.env['FENCER_FUZZ_SEED'] ?? 290_029);
/** Short: a generated Acquire may wait on a held lock, and the client giving up is one of the cases. */
const CALL_TIMEOUT_MS = 1_500;
const RSS_GROWTH_BYTES_MAX = 100 * 1024 * 1024;
const ADMIN_SKIPPED = ['AddMember', 'RemoveMember', 'PromoteLearner', 'TransferLeadership', 'TakeSnapshot', 'ReadSnapshot'];

let cell: Cell;
let pid = 0;
let pool: string[] = [];

beforeAll(async () => {
  cell = await startCell({ replicas: 1 });
  await cell.leader();
  pid = cell.children.get(cell.replicas[0]!.id)!.pid!;
  const sessions = await Promise.all([0, 1, 2].map(() => cell.client.openSession('fz', 3_600_000)));
  pool = [
    '',
    'fz',
    'a/b',
    '/ls/fz/a',
    '/ls/fz/',
    '/ls/fz/a/b',
    '/ls/other/x',
    '/ls/',
    'fz:nosuch',
    'r1',
    'worker',
    'n9',
    '127.0.0.1:1',
    ...sessions.map((s) => s.sessionId),
  ];
}, 120_000);

afterAll(async () => {
  await cell?.stop();
});

/** A client that only does right: its namespace's lock, acquired and released in a loop until `stop`. */
async function wellBehaved(stop: () => boolean): Promise<{ ok: number; failures: string[] }> {
  const failures: string[] = [];
  let ok = 0;
  const { sessionId } = await cell.client.openSession('good', 3_600_000);
  for (let i = 0; !stop(); i++) {
    try {
      const g = await cell.client.acquire({ sessionId, name: '/ls/good/x', requestId: `g${i}`, waitMs: 0 });
      await cell.client.call('release', { sessionId, name: '/ls/good/x', token: g.token });
      ok++;
    } catch (e) {
      failures.push((e as Error).message);
    }
  }
  return { ok, failures };
}

describe('structured fuzzing of a cell node', () => {
  it(
    `answers ${LOCK_REQUESTS + ADMIN_REQUESTS} generated requests without INTERNAL, crash or leak, serving a good client throughout`,
    async () => {
      const lockMethods = methodsOf('proto/lockservice/v1/lockservice.proto', 'lockservice.v1.LockService');
      const adminMethods = methodsOf('proto/fencer/admin/v1/admin.proto', 'fencer.admin.v1.CellAdmin', ADMIN_SKIPPED);
      expect(lockMethods.map((m) => m.name)).toEqual(expect.arrayContaining(['OpenSession', 'Acquire', 'KeepAlive', 'Watch']));
      const lockClient = rawClient(cell.replicas[0]!.grpc);
      const adminRaw = rawClient(cell.replicas[0]!.admin);
      const t = tally();
      try {
        await fuzz({ client: lockClient, methods: lockMethods, count: 500, seed: SEED - 1, pool, timeoutMs: CALL_TIMEOUT_MS }, tally()); // warm-up, so RSS is measured past JIT and pools
        const rssBefore = await rssOf(pid);
        let stopped = false;
        const good = wellBehaved(() => stopped);
        const started = Date.now();
        await Promise.all([
          fuzz({ client: lockClient, methods: lockMethods, count: LOCK_REQUESTS, seed: SEED, pool, timeoutMs: CALL_TIMEOUT_MS }, t),
          fuzz({ client: adminRaw, methods: adminMethods, count: ADMIN_REQUESTS, seed: SEED + 7, pool, timeoutMs: CALL_TIMEOUT_MS }, t),
        ]);
        stopped = true;
        const served = await good;
        const rssAfter = await rssOf(pid);
        console.log(
          `${describeTally(t)} in ${Date.now() - started} ms; RSS ${(rssBefore / 2 ** 20).toFixed(0)} -> ${(rssAfter / 2 ** 20).toFixed(0)} MiB; good client ${served.ok} rounds`,
        );
        expect(t.sent).toBe(LOCK_REQUESTS + ADMIN_REQUESTS);
        expect(t.bad.slice(0, 5)).toEqual([]);
        expect(served.failures.slice(0, 3)).toEqual([]);
        expect(served.ok).toBeGreaterThan(0);
        expect(rssAfter - rssBefore).toBeLessThan(RSS_GROWTH_BYTES_MAX);
        // Alive and still serving after it all.
        expect(cell.children.get(cell.replicas[0]!.id)!.exitCode).toBeNull();
        expect((await cell.client.openSession('after', 60_000)).sessionId).toMatch(/^after:/);
      } finally {
        lockClient.close();
        adminRaw.close();
      }
    },
    Math.max(120_000, 600_000 * SCALE),
  );

  it(
    `closes ${RAW_PAYLOADS} raw malformed HTTP/2 and protobuf payloads on the client port without crash or leak`,
    async () => {
      const port = Number(cell.replicas[0]!.grpc.split(':')[1]);
      const rssBefore = await rssOf(pid);
      let stopped = false;
      const good = wellBehaved(() => stopped);
      const started = Date.now();
      const seen = await fuzzRaw(port, RAW_PAYLOADS, SEED + 11);
      stopped = true;
      const served = await good;
      expect(seen.closed + seen.held).toBe(RAW_PAYLOADS);
      const rssAfter = await rssOf(pid);
      const mib = (b: number) => (b / 2 ** 20).toFixed(0);
      console.log(
        `raw fuzz: ${RAW_PAYLOADS} payloads in ${Date.now() - started} ms (${seen.held} left open by the node); RSS ${mib(rssBefore)} -> ${mib(rssAfter)} MiB; good client ${served.ok} rounds`,
      );
      expect(seen.held).toBeLessThanOrEqual(Math.ceil(RAW_PAYLOADS * RAW_HELD_FRACTION_MAX));
      expect(served.failures.slice(0, 3)).toEqual([]);
      expect(served.ok).toBeGreaterThan(0);
      expect(rssAfter - rssBefore).toBeLessThan(RSS_GROWTH_BYTES_MAX);
      expect(cell.children.get(cell.replicas[0]!.id)!.exitCode).toBeNull();
      expect((await cell.client.openSession('after', 60_000)).sessionId).toMatch(/^after:/);
    },
    Math.max(120_000, 600_000 * SCALE),
  );
});

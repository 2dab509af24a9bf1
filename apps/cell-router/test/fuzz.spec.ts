/**
 * Goal: the router and the session proxy survive structured fuzzing of the
 * lock service (issue 29): requests generated from lockservice.proto with
 * fast-check (huge strings, boundary numbers, unknown enum values, unknown
 * fields, wrong wire types, truncated and random bytes, cancelled streams)
 * never get INTERNAL or UNKNOWN, never go unanswered, crash neither process
 * nor grow its RSS by 100 MiB, and a well-behaved client working through
 * the router beside them keeps being served.
 * Method: a test fleet (one cell of one replica, a router, a proxy, a
 * routing file naming "fz" and "good"); requests sampled from a fixed seed
 * (FENCER_FUZZ_SEED overrides it) go as raw bytes to the router and the
 * proxy at once, 64 at a time each; a client opens a session in "good"
 * through the router and acquires and releases in a loop, and every one of
 * its calls must succeed. RSS is read from /proc after a warm-up batch and
 * at the end. Then raw bytes on each front end's port, one connection each
 * (random bytes, lying HTTP/2 frames, gRPC messages with lying prefixes),
 * the good client working beside them; connections left open are dropped
 * after 2 s and counted: at most 1% (about 18% stalled mid-frame stayed
 * open before the listeners checked the HTTP/2 opening).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClient } from '@fencer/fleet/contract';
import { describeTally, fuzz, fuzzRaw, methodsOf, rawClient, rssOf, tally } from '@fencer/fleet/fuzz';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';

/**
 * Requests per front end and raw payloads per port, times FENCER_FUZZ_SCALE
 * (default 1: issue 29's bar, which CI runs: with the cell's 20,000 in
 * apps/cell-node/test/fuzz.spec.ts, 50,000 structured requests, and 10,000
 * raw payloads on each port); a quick local run lowers it
 * (FENCER_FUZZ_SCALE=0.2).
 */
const SCALE = Number(process.env['FENCER_FUZZ_SCALE'] ?? 1);
const REQUESTS = Math.round(Number(process.env['FENCER_FUZZ_FRONT_REQUESTS'] ?? 15_000 * SCALE));
/** Raw malformed HTTP/2 and protobuf payloads per front end, each on its own connection. */
const RAW_PAYLOADS = Math.round(Number(process.env['FENCER_FUZZ_RAW_PAYLOADS'] ?? 10_000 * SCALE));
/** Raw connections a front end may leave open past the fuzzer's 2 s (its listener checks the HTTP/2 opening: @fencer/routing lock-server.ts). */
const RAW_HELD_FRACTION_MAX = 0.01;
const SEED = Number(process.env['FENCER_FUZZ_SEED'] ?? 290_029);
/** Short: a generated Acquire may wait on a held lock, and the client giving up is one of the cases. */
const CALL_TIMEOUT_MS = 1_500;
const RSS_GROWTH_BYTES_MAX = 100 * 1024 * 1024;

let fleet: TestFleet;
let client: TestClient;
let pool: string[] = [];

beforeAll(async () => {
  fleet = await startTestFleet({ cells: 1, replicas: 1, routers: 1, proxies: 1, routes: { fz: 'cell-1', good: 'cell-1' } });
  client = new TestClient([fleet.routerEndpoints[0]!]);
  const sessions = await Promise.all([0, 1, 2].map(() => client.openSession('fz', 3_600_000)));
  pool = ['', 'fz', 'nowhere', 'a/b', '/ls/fz/a', '/ls/fz/', '/ls/fz/a/b', '/ls/nowhere/x', '/ls/', 'fz:nosuch', 'r1', 'worker'];
  pool.push(...sessions.map((s) => s.sessionId));
}, 180_000);

afterAll(async () => {
  client?.close();
  await fleet?.stop();
});

/** A client that only does right, through the router: its namespace's lock, acquired and released until `stop`. */
async function wellBehaved(stop: () => boolean): Promise<{ ok: number; failures: string[] }> {
  const failures: string[] = [];
  let ok = 0;
  const { sessionId } = await client.openSession('good', 3_600_000);
  for (let i = 0; !stop(); i++) {
    try {
      const g = await client.acquire({ sessionId, name: '/ls/good/x', requestId: `g${i}`, waitMs: 0 });
      await client.call('release', { sessionId, name: '/ls/good/x', token: g.token });
      ok++;
    } catch (e) {
      failures.push((e as Error).message);
    }
  }
  return { ok, failures };
}

describe('structured fuzzing of the router and the proxy', () => {
  it(
    `answers ${2 * REQUESTS} generated requests without INTERNAL, crash or leak, serving a good client throughout`,
    async () => {
      const methods = methodsOf('proto/lockservice/v1/lockservice.proto', 'lockservice.v1.LockService');
      const routerRaw = rawClient(fleet.routerEndpoints[0]!);
      const proxyRaw = rawClient(fleet.proxyEndpoints[0]!);
      const pids = [fleet.routers[0]!.pid, fleet.proxies[0]!.pid];
      const [routerTally, proxyTally] = [tally(), tally()];
      const run = (c: typeof routerRaw, count: number, seed: number) => ({
        client: c,
        methods,
        count,
        seed,
        pool,
        timeoutMs: CALL_TIMEOUT_MS,
      });
      try {
        // Warm-up, so RSS is measured past JIT and pools.
        await Promise.all([fuzz(run(routerRaw, 500, SEED - 1), tally()), fuzz(run(proxyRaw, 500, SEED - 2), tally())]);
        const rssBefore = await Promise.all(pids.map(rssOf));
        let stopped = false;
        const good = wellBehaved(() => stopped);
        const started = Date.now();
        await Promise.all([fuzz(run(routerRaw, REQUESTS, SEED), routerTally), fuzz(run(proxyRaw, REQUESTS, SEED + 3), proxyTally)]);
        stopped = true;
        const served = await good;
        const rssAfter = await Promise.all(pids.map(rssOf));
        const mib = (b: number) => (b / 2 ** 20).toFixed(0);
        console.log(
          `router ${describeTally(routerTally)} in ${Date.now() - started} ms; RSS ${mib(rssBefore[0]!)} -> ${mib(rssAfter[0]!)} MiB`,
        );
        console.log(
          `proxy ${describeTally(proxyTally)}; RSS ${mib(rssBefore[1]!)} -> ${mib(rssAfter[1]!)} MiB; good client ${served.ok} rounds`,
        );
        expect(routerTally.sent + proxyTally.sent).toBe(2 * REQUESTS);
        expect(routerTally.bad.slice(0, 5)).toEqual([]);
        expect(proxyTally.bad.slice(0, 5)).toEqual([]);
        expect(served.failures.slice(0, 3)).toEqual([]);
        expect(served.ok).toBeGreaterThan(0);
        for (let i = 0; i < pids.length; i++) expect(rssAfter[i]! - rssBefore[i]!).toBeLessThan(RSS_GROWTH_BYTES_MAX);
        expect(fleet.alive(fleet.routers[0]!.id) && fleet.alive(fleet.proxies[0]!.id)).toBe(true);
        expect((await client.openSession('good', 60_000)).sessionId).toMatch(/^good:/);
      } finally {
        routerRaw.close();
        proxyRaw.close();
      }
    },
    Math.max(120_000, 600_000 * SCALE),
  );

  it(
    `closes ${RAW_PAYLOADS} raw malformed HTTP/2 and protobuf payloads on each of the router and the proxy`,
    async () => {
      const targets = [
        { port: Number(fleet.routerEndpoints[0]!.split(':')[1]), pid: fleet.routers[0]!.pid, id: fleet.routers[0]!.id },
        { port: Number(fleet.proxyEndpoints[0]!.split(':')[1]), pid: fleet.proxies[0]!.pid, id: fleet.proxies[0]!.id },
      ];
      const rssBefore = await Promise.all(targets.map((t) => rssOf(t.pid)));
      let stopped = false;
      const good = wellBehaved(() => stopped);
      const started = Date.now();
      const sent = await Promise.all(targets.map((t, i) => fuzzRaw(t.port, RAW_PAYLOADS, SEED + 11 + i)));
      stopped = true;
      const served = await good;
      expect(sent.map((x) => x.closed + x.held)).toEqual([RAW_PAYLOADS, RAW_PAYLOADS]);
      const rssAfter = await Promise.all(targets.map((t) => rssOf(t.pid)));
      console.log(
        `raw fuzz: ${RAW_PAYLOADS} payloads each in ${Date.now() - started} ms (left open: ${sent.map((x) => x.held).join(', ')}); RSS ${rssBefore.map((b, i) => `${(b / 2 ** 20).toFixed(0)} -> ${(rssAfter[i]! / 2 ** 20).toFixed(0)} MiB`).join(', ')}; good client ${served.ok} rounds`,
      );
      for (const x of sent) expect(x.held).toBeLessThanOrEqual(Math.ceil(RAW_PAYLOADS * RAW_HELD_FRACTION_MAX));
      expect(served.failures.slice(0, 3)).toEqual([]);
      expect(served.ok).toBeGreaterThan(0);
      for (let i = 0; i < targets.length; i++) {
        expect(rssAfter[i]! - rssBefore[i]!).toBeLessThan(RSS_GROWTH_BYTES_MAX);
        expect(fleet.alive(targets[i]!.id)).toBe(true);
      }
      expect((await client.openSession('good', 60_000)).sessionId).toMatch(/^good:/);
    },
    Math.max(120_000, 600_000 * SCALE),
  );
});

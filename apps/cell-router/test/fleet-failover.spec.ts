/**
 * Goal: the issue's "Done when" for a fleet behind a router and proxies.
 * A client holding locks in namespaces on two cells works transparently;
 * kill -9 of a cell leader while clients acquire and release fails no call
 * (the client only ever sees statuses it retries within its deadline); kill
 * -9 of the proxy carrying a client's KeepAlive stream moves its sessions to
 * the other proxy within one heartbeat interval and no session expires (the
 * cells' fencer_session_expiries_total stays 0).
 * Method: @fencer/fleet starts 2 cells x 3 cell-node processes, one router
 * and two session proxies on 127.0.0.1, with "alpha" routed to cell-1 and
 * "beta" to cell-2; the real client library (@fencer/client) talks to them.
 * Timings are measured with the test's clock around events the client
 * reports (heartbeats sent and answered), not with sleeps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorCode } from '@fencer/base';
import { FencerClient } from '@fencer/client';
import { isRetryable, lockservice } from '@fencer/protocol';

const W = lockservice.WatchEventType;
import { TestClient, eventually } from '@fencer/fleet/contract';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';

let fleet: TestFleet;

beforeAll(async () => {
  fleet = await startTestFleet({ cells: 2, replicas: 3, routers: 1, proxies: 2, routes: { alpha: 'cell-1', beta: 'cell-2' } });
}, 180_000);
afterAll(async () => {
  await fleet?.stop();
});

const cellEndpoints = (cellId: string): string[] => fleet.plan.find((c) => c.id === cellId)!.replicas.map((r) => r.grpc);

/** fencer_session_expiries_total summed over every live replica of both cells. */
async function expiriesInFleet(): Promise<number> {
  let sum = 0;
  for (const r of fleet.plan.flatMap((c) => c.replicas)) {
    if (!fleet.alive(r.id)) continue;
    // A replica restarted by the previous case may not serve /metrics yet.
    const text = await eventually(
      () =>
        fetch(r.metrics).then(
          (res) => res.text(),
          () => undefined,
        ),
      30_000,
      `${r.id} /metrics`,
    );
    sum += Number(/^fencer_session_expiries_total (\d+)/m.exec(text)?.[1] ?? 0);
  }
  return sum;
}

describe('a client in front of two cells', () => {
  it('holds locks in namespaces on both cells through the router, each lock living in its own cell', async () => {
    const client = new FencerClient({ endpoints: fleet.routerEndpoints, proxies: fleet.proxyEndpoints, ttlMs: 4000 });
    const direct1 = new TestClient(cellEndpoints('cell-1'));
    const direct2 = new TestClient(cellEndpoints('cell-2'));
    try {
      const a = await client.acquire('/ls/alpha/invoice-1', { waitMs: 0 });
      const b = await client.acquire('/ls/beta/invoice-1', { waitMs: 0 });
      expect(a.token).toBeGreaterThan(0);
      expect(b.token).toBeGreaterThan(0);
      expect((await client.getLock('/ls/alpha/invoice-1')).lock.holders.map((h) => h.token)).toEqual([a.token]);
      // Each lock is in the cell its namespace is routed to, and only there.
      const inCell1 = await direct1.call<{ name: string }, { lock: { holders: unknown[] } }>('getLock', { name: '/ls/alpha/invoice-1' });
      const inCell2 = await direct2.call<{ name: string }, { lock: { holders: unknown[] } }>('getLock', { name: '/ls/beta/invoice-1' });
      expect(inCell1.lock.holders).toHaveLength(1);
      expect(inCell2.lock.holders).toHaveLength(1);
      expect(
        (await direct2.call<{ name: string }, { lock: { holders: unknown[] } }>('getLock', { name: '/ls/alpha/invoice-1' })).lock.holders,
      ).toHaveLength(0);
      // Heartbeats for both sessions go through a proxy, and keep the locks past their TTL.
      expect(fleet.proxyEndpoints).toContain(client.keepAliveEndpoints.current);
      const heldSince = Date.now();
      await eventually(() => (Date.now() - heldSince > 5000 ? true : undefined), 10_000, 'one TTL and more');
      expect(a.held && b.held).toBe(true);
      expect(await a.release()).toBe(true);
      expect(await b.release()).toBe(true);
    } finally {
      direct1.close();
      direct2.close();
      await client.close();
    }
  });
});

describe('failures behind the router', () => {
  it('kill -9 of a cell leader while clients acquire and release: no call fails, and every retried status is one the client retries', async () => {
    const retried: string[] = [];
    const clients = [1, 2, 3].map(
      () =>
        new FencerClient({
          endpoints: fleet.routerEndpoints,
          proxies: fleet.proxyEndpoints,
          ttlMs: 6000,
          onRetry: (i) => retried.push(i.error.code),
        }),
    );
    const failures: unknown[] = [];
    let cycles = 0;
    let stop = false;
    const loops = clients.map(async (c, i) => {
      while (!stop) {
        try {
          const h = await c.acquire(`/ls/alpha/k-${i % 2}`, { waitMs: 20_000 });
          await h.release();
          cycles++;
        } catch (e) {
          failures.push(e);
          return;
        }
      }
    });
    try {
      await eventually(() => (cycles >= 10 ? true : undefined), 30_000, 'ten cycles before the kill');
      const leader = await fleet.leaderOf('cell-1');
      await fleet.kill(leader.nodeId, 'SIGKILL');
      const atKill = cycles;
      const newLeader = await fleet.leaderOf('cell-1', 30_000);
      expect(newLeader.nodeId).not.toBe(leader.nodeId);
      await eventually(() => (cycles >= atKill + 20 || failures.length > 0 ? true : undefined), 60_000, 'twenty cycles after the kill');
    } finally {
      stop = true;
      await Promise.all(loops);
      await Promise.all(clients.map((c) => c.close()));
    }
    expect(failures).toEqual([]);
    for (const code of retried) expect(isRetryable(code as ErrorCode), code).toBe(true);
    // The killed replica rejoins with its data, so the next case has a whole cell.
    const dead = fleet.plan[0]!.replicas.find((r) => !fleet.alive(r.id));
    if (dead) fleet.restart(dead.id);
  }, 120_000);

  it('a Watch through the router survives kill -9 of the replica serving it: no gap, no repeat', async () => {
    const client = new FencerClient({ endpoints: fleet.routerEndpoints, proxies: fleet.proxyEndpoints, ttlMs: 6000 });
    const raw = new TestClient(fleet.routerEndpoints);
    const events: lockservice.WatchEvent[] = [];
    const stream = raw.raw(fleet.routerEndpoints[0]!).watch({ name: '/ls/beta/w/', prefix: true, sinceRevision: 0 });
    const streamError = new Promise<unknown>((resolve) => stream.on('error', resolve));
    stream.on('data', (e: lockservice.WatchEvent) => events.push(e));
    const cycle = async (i: number): Promise<void> => {
      const h = await client.acquire(`/ls/beta/w/${i}`, { waitMs: 10_000 });
      await h.release();
    };
    const live = (): lockservice.WatchEvent[] =>
      events.filter((e) => e.type === W.WATCH_EVENT_TYPE_ACQUIRED || e.type === W.WATCH_EVENT_TYPE_RELEASED);
    let killed: string | undefined;
    try {
      await eventually(() => (events.some((e) => e.type === W.WATCH_EVENT_TYPE_PROGRESS) ? true : undefined), 20_000, 'the watch to start');
      for (let i = 0; i < 5; i++) await cycle(i);
      await eventually(() => (live().length >= 10 ? true : undefined), 20_000, 'ten events before the kill');
      // The replica the router's watch is served from is the one with a watcher.
      const cell2 = fleet.plan.find((c) => c.id === 'cell-2')!.replicas;
      const serving = await eventually(
        async () => {
          for (const r of cell2) {
            if (!fleet.alive(r.id)) continue;
            const text = await fetch(r.metrics).then(
              (x) => x.text(),
              () => '',
            );
            if (/^fencer_watchers [1-9]/m.test(text)) return r.id;
          }
          return undefined;
        },
        10_000,
        'the replica serving the watch',
      );
      killed = serving;
      await fleet.kill(serving, 'SIGKILL');
      for (let i = 5; i < 10; i++) await cycle(i);
      await eventually(() => (live().length >= 20 ? true : undefined), 30_000, 'twenty events after the kill');
    } finally {
      stream.cancel();
      await streamError;
      raw.close();
      await client.close();
      if (killed) fleet.restart(killed);
    }
    const revisions = live().map((e) => e.revision);
    expect(revisions).toEqual([...revisions].sort((a, b) => a - b));
    expect(new Set(revisions).size, 'no event twice').toBe(revisions.length);
    for (let i = 0; i < 10; i++) {
      const of = live()
        .filter((e) => e.name === `/ls/beta/w/${i}`)
        .map((e) => e.type);
      expect(of, `lock ${i}: acquired then released, once each`).toEqual([W.WATCH_EVENT_TYPE_ACQUIRED, W.WATCH_EVENT_TYPE_RELEASED]);
    }
  }, 90_000);

  it('kill -9 of the proxy carrying a client: its sessions reach the other proxy within one heartbeat interval, and no session expires', async () => {
    const ttlMs = 3000;
    const sent: { address: string; atMs: number }[] = [];
    const client = new FencerClient({
      endpoints: fleet.routerEndpoints,
      proxies: fleet.proxyEndpoints,
      ttlMs,
      keepAliveObserver: { onHeartbeatSent: (_id, address) => sent.push({ address, atMs: Date.now() }) },
    });
    try {
      const expiriesBefore = await expiriesInFleet();
      const a = await client.acquire('/ls/alpha/held', { waitMs: 0 });
      const b = await client.acquire('/ls/beta/held', { waitMs: 0 });
      await eventually(() => (client.keepAliveEndpoints.current ? true : undefined), 10_000, 'a KeepAlive stream');
      const victim = client.keepAliveEndpoints.current!;
      const proxy = fleet.proxies.find((p) => p.grpc === victim)!;
      await fleet.kill(proxy.id, 'SIGKILL');
      const killedAtMs = Date.now();
      const other = fleet.proxyEndpoints.find((p) => p !== victim)!;
      const moved = await eventually(
        () => sent.find((s) => s.address === other && s.atMs >= killedAtMs),
        10_000,
        'a heartbeat through the other proxy',
      );
      const intervalMs = Math.floor(ttlMs / 3);
      expect(moved.atMs - killedAtMs).toBeLessThanOrEqual(intervalMs);
      // Two TTLs later both locks are still held, and no cell expired any session.
      await eventually(() => (Date.now() - killedAtMs > 2 * ttlMs ? true : undefined), 3 * ttlMs, 'two TTLs');
      expect(a.held && b.held).toBe(true);
      expect(await expiriesInFleet()).toBe(expiriesBefore);
      expect(expiriesBefore).toBe(0);
      await a.release();
      await b.release();
    } finally {
      await client.close();
    }
  }, 60_000);
});

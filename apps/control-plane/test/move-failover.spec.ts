/**
 * Goal: a move survives the loss of the meta leader in every state
 * (docs/decisions/0019-the-move-worker.md): after kill -9 of the leader
 * while the move is freezing, copying, switching or cleaning, the new
 * leader resumes it from the journal and it ends `done` (or `failed`
 * before switching, with the source serving again); either way the tenant
 * serves with every grant it had, its tokens keep growing, and none of its
 * sessions expires. And the ownership reconciler: a tenant created while
 * its cell had no leader (the API answers 503 CELL_UNAVAILABLE) is claimed
 * once the cell answers again.
 * Method: real processes on 127.0.0.1 (tools/fleet's startTestFleet): two
 * cells of three replicas run --managed, a meta group of three control-plane
 * instances with --move-step-pause-ms so each move state lasts long enough
 * to be caught, a router and a proxy following its routing table. Each case
 * builds a small tenant over raw gRPC (TenantLoad, kept alive through the
 * proxy), starts a move, waits until the journal shows the state, SIGKILLs
 * the instance /v1/health names leader, then restarts it once the move has
 * ended. The reconciler case SIGSTOPs every replica of a cell around a
 * POST to a follower (which forwards it to the leader: the answer must be
 * CELL_UNAVAILABLE, not the forward's own timeout) and SIGCONTs them; the
 * cell's admin ListNamespaces is the evidence of the claim.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata } from '@grpc/grpc-js';
import { adminClient, waitForControlPlane } from '@fencer/fleet';
import { startTestFleet, TenantLoad, type TestFleet } from '@fencer/fleet/testing';
import type { adminpb } from '@fencer/protocol';
import { getFromAny, http, routeOf, startMove, waitForMove } from './support/moves.js';

/** Each cell step of a move waits this long first: a state lasts at least that, well within the 30 s frozen limit. */
const STEP_PAUSE_MS = 2_000;

let fleet: TestFleet;

beforeAll(async () => {
  fleet = await startTestFleet({
    cells: 2,
    replicas: 3,
    routers: 1,
    proxies: 1,
    controlPlanes: 3,
    controlPlaneArgs: ['--move-step-pause-ms', String(STEP_PAUSE_MS)],
  });
}, 300_000);

afterAll(async () => {
  await fleet?.stop();
}, 60_000);

const liveUrls = (): string[] => fleet.controlPlanes.filter((c) => fleet.alive(c.id)).map((c) => c.url);

async function createTenant(namespace: string, cell: string): Promise<{ status: number; body: { code?: string } }> {
  for (;;) {
    const res = await http(liveUrls()[0]!, 'POST', '/v1/tenants', { namespace, cell });
    if (res.status !== 0) return res;
  }
}

async function namespacesOf(cell: string): Promise<string[] | undefined> {
  const replicas = fleet.plan.find((c) => c.id === cell)!.replicas;
  for (const r of replicas) {
    const client = adminClient(r.admin);
    try {
      const res = await new Promise<adminpb.ListNamespacesResponse | undefined>((resolve) =>
        client.listNamespaces({}, new Metadata(), { deadline: Date.now() + 2_000 }, (err, out) => resolve(err ? undefined : out)),
      );
      if (res) return res.namespaces.filter((n) => n.state === 'active').map((n) => n.namespace);
    } finally {
      client.close();
    }
  }
  return undefined;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('kill -9 of the meta leader during a move', () => {
  for (const state of ['freezing', 'copying', 'switching', 'cleaning'] as const) {
    it(`in ${state}: the move ends done, or failed before switching with the source serving`, async () => {
      const ns = `fo-${state}`;
      expect((await createTenant(ns, 'cell-1')).status).toBe(201);
      const load = new TenantLoad({ router: fleet.routerEndpoints[0]!, proxy: fleet.proxyEndpoints[0]!, namespace: ns });
      try {
        load.startKeepAlive();
        await load.openSessions(20);
        await load.holdLocks(2);
        const before = await load.listLocks(load.name('held') + '/');

        const started = await startMove(liveUrls()[0]!, ns, 'cell-2');
        const seen = await waitForMove(liveUrls(), started.id, (m) => m.state === state || m.state === 'done' || m.state === 'failed');
        expect(seen.state, `the move skipped ${state}: ${JSON.stringify(seen)}`).toBe(state);
        const leader = await fleet.metaLeader();
        await fleet.kill(leader.id);

        const end = await waitForMove(liveUrls(), started.id, (m) => m.state === 'done' || m.state === 'failed', 180_000);
        const route = await routeOf(liveUrls(), ns);
        console.log(`meta leader ${leader.id} killed in ${state}: the move ended ${end.state}${end.error ? ` (${end.error})` : ''}`);
        if (end.state === 'failed') {
          expect(['freezing', 'copying'], `failed after switching: ${JSON.stringify(end)}`).toContain(state);
          expect(end.error).toBeTruthy();
          expect(route).toMatchObject({ cell: 'cell-1', state: 'active' });
        } else {
          expect(route).toMatchObject({ cell: 'cell-2', state: 'active' });
          expect(end.sessions).toBe(20);
          expect(end.locks).toBe(40);
        }

        // The tenant serves where its route points, with every grant, and tokens keep growing.
        expect(await load.listLocks(load.name('held') + '/')).toEqual(before);
        const [name, grant] = [...load.held][0]!;
        expect(await load.release(name, grant.sessionId, grant.token)).toBe(true);
        const again = await load.waitFor({ sessionId: grant.sessionId, name, mode: 1, waitMs: 0, requestId: 'again', lockDelayMs: 0 });
        expect(again.token).toBeGreaterThan(grant.token);
        await load.allHeartbeatsAnsweredSince(Date.now());
        expect(load.expired).toEqual([]);
      } finally {
        await load.close();
        for (const c of fleet.controlPlanes) if (!fleet.alive(c.id)) fleet.restart(c.id);
        await Promise.all(fleet.controlPlanes.map((c) => waitForControlPlane(c.url, 60_000)));
      }
    }, 400_000);
  }
});

describe('the ownership reconciler', () => {
  it('claims a tenant created while its cell had no leader, once the cell answers', async () => {
    const replicas = fleet.plan.find((c) => c.id === 'cell-2')!.replicas;
    // Through a follower: its forward to the leader must outlive the leader's search for the cell's leader.
    const leader = await fleet.metaLeader();
    const follower = fleet.controlPlanes.find((c) => c.id !== leader.id && fleet.alive(c.id))!;
    for (const r of replicas) fleet.signal(r.id, 'SIGSTOP');
    let created: { status: number; body: { code?: string } };
    try {
      // Once: a retry would meet the record the first try left (409 TENANT_EXISTS).
      created = await http(follower.url, 'POST', '/v1/tenants', { namespace: 'late', cell: 'cell-2' }, 120_000);
    } finally {
      for (const r of replicas) fleet.signal(r.id, 'SIGCONT');
    }
    expect(created.status, JSON.stringify(created.body)).toBe(503);
    expect(created.body.code).toBe('CELL_UNAVAILABLE');
    expect(await routeOf(liveUrls(), 'late')).toMatchObject({ cell: 'cell-2' });
    await until(
      'the claim of "late" on cell-2',
      async () => ((await namespacesOf('cell-2'))?.includes('late') ? true : undefined),
      120_000,
    );
    // Claimed, it serves: a session opens there through the router.
    const load = new TenantLoad({ router: fleet.routerEndpoints[0]!, proxy: fleet.proxyEndpoints[0]!, namespace: 'late' });
    try {
      expect(await load.openSessions(1)).toHaveLength(1);
    } finally {
      await load.close();
    }
    expect((await getFromAny(liveUrls(), '/v1/tenants/late')).cell).toBe('cell-2');
  }, 300_000);
});

/**
 * Goal: the control-plane source speaks the contract's long poll and tenant
 * creation, keeps the last table while the control plane is unreachable,
 * and, given several instances of its meta group, follows the next when
 * the one it follows dies, hangs or answers 5xx (long poll and tenant
 * creation alike), creating each tenant once.
 * Method: small fastify servers on 127.0.0.1:0 that speak the control
 * plane's contract (GET /v1/routing with sinceVersion/waitMs, GET
 * /v1/fleet, POST /v1/tenants) over one shared meta-group state, killed by
 * closing them and destroying their sockets; which instance the source
 * follows is awaited as the long poll it parks.
 */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { ControlPlaneRoutingSource } from '../src/index.js';
import { type FakeInstance, fakeControlPlane, fakeControlPlane2, fakeMetaGroup, nextTable } from './support/fake-control-plane.js';

const logger = pino({ level: 'silent' });

describe('ControlPlaneRoutingSource', () => {
  it('follows the long poll, takes replica addresses from /v1/fleet, and creates tenants with POST /v1/tenants', async () => {
    const cp = await fakeControlPlane();
    const source = new ControlPlaneRoutingSource({ baseUrl: cp.url, logger, waitMs: 5_000 });
    try {
      await source.start();
      expect(source.table().version).toBe(1);
      expect(source.table().cells.get('cell-2')!.replicas).toEqual(['127.0.0.1:7011']);
      const changed = nextTable(source);
      cp.setRoutes({ a: 'cell-2' });
      const t = await changed;
      expect(t.version).toBe(2);
      expect(t.routes.get('a')!.cell).toBe('cell-2');
      expect(cp.polls.some((q) => q.sinceVersion === '1' && q.waitMs === '5000')).toBe(true);

      const created = await source.createTenant('newbie');
      expect(created.routes.get('newbie')!.cell).toBe('cell-2');
      await expect(source.createTenant('_bad')).rejects.toMatchObject({ code: 'INVALID_NAME' });
    } finally {
      source.close();
      await cp.app.close();
    }
  });

  it('keeps serving the last table while the control plane is unreachable, and picks up changes when it is back', async () => {
    const cp = await fakeControlPlane();
    const port = Number(new URL(cp.url).port);
    const source = new ControlPlaneRoutingSource({ baseUrl: cp.url, logger, waitMs: 200 });
    try {
      await source.start();
      expect(source.table().routes.get('a')!.cell).toBe('cell-1');
      await cp.app.close();
      // Down: a refresh fails and the table in force stays.
      expect((await source.refresh()).routes.get('a')!.cell).toBe('cell-1');
      // Back on the same port, with a newer table.
      const again = await fakeControlPlane2(port);
      try {
        const t = await nextTable(source);
        expect(t.routes.get('b')!.cell).toBe('cell-2');
      } finally {
        await again.close();
      }
    } finally {
      source.close();
    }
  });
});

describe('ControlPlaneRoutingSource over the instances of a meta group', () => {
  /** The value of a metric of the source's registry, by label set. */
  const metricValues = async (registry: Registry, name: string): Promise<{ labels: object; value: number }[]> =>
    (await registry.getSingleMetric(name)!.get()).values.map((v) => ({ labels: v.labels, value: v.value }));

  it('follows the first instance, moves to the next when it dies, and a change published there reaches the source', async () => {
    const group = fakeMetaGroup();
    const cp1 = await fakeControlPlane(group);
    const cp2 = await fakeControlPlane(group);
    const registry = new Registry();
    const source = new ControlPlaneRoutingSource({ baseUrl: `${cp1.url},${cp2.url}`, logger, waitMs: 5_000, registry });
    try {
      const followingFirst = cp1.parked();
      await source.start();
      await followingFirst;
      expect(source.following()).toBe(cp1.url);
      expect(source.table().version).toBe(1);
      expect(cp2.polls).toEqual([]);
      expect(await metricValues(registry, 'fencer_routing_control_plane_following')).toEqual([
        { labels: { url: cp1.url }, value: 1 },
        { labels: { url: cp2.url }, value: 0 },
      ]);

      // The first dies with the long poll parked on it; the source goes on with the second, from the version in force.
      const followingSecond = cp2.parked();
      await cp1.kill();
      await followingSecond;
      expect(source.following()).toBe(cp2.url);
      expect(cp2.polls.some((q) => q.sinceVersion === '1' && q.waitMs === '5000')).toBe(true);

      const changed = nextTable(source);
      cp2.setRoutes({ a: 'cell-2', b: 'cell-1' });
      const t = await changed;
      expect(t.version).toBe(2);
      expect(t.routes.get('a')!.cell).toBe('cell-2');
      expect(t.routes.get('b')!.cell).toBe('cell-1');
      expect(await metricValues(registry, 'fencer_routing_control_plane_following')).toEqual([
        { labels: { url: cp1.url }, value: 0 },
        { labels: { url: cp2.url }, value: 1 },
      ]);
      expect(await metricValues(registry, 'fencer_routing_control_plane_switches_total')).toEqual([{ labels: {}, value: 1 }]);
    } finally {
      source.close();
      await cp2.app.close();
    }
  });

  it('keeps a parked poll on an instance that answers its liveness probes, and gives up one that hangs without waiting out the poll', async () => {
    const group = fakeMetaGroup();
    const cp1 = await fakeControlPlane(group);
    const cp2 = await fakeControlPlane(group);
    // A 30 s long poll: the hung instance never answers it, so only the probe can move the source within the test.
    const source = new ControlPlaneRoutingSource({ baseUrl: `${cp1.url},${cp2.url}`, logger, waitMs: 30_000, livenessProbeMs: 100 });
    try {
      const followingFirst = cp1.parked();
      await source.start();
      await followingFirst;
      // Alive: three probes answered, and the source still follows the first instance with its poll parked there.
      await cp1.healthAnswered(3);
      expect(source.following()).toBe(cp1.url);
      expect(cp2.polls).toEqual([]);
      expect(cp2.healthAnswers).toBe(0);

      const followingSecond = cp2.parked();
      const pollsOnFirst = cp1.polls.length;
      cp1.hang();
      await followingSecond;
      expect(source.following()).toBe(cp2.url);
      expect(cp1.polls.length).toBe(pollsOnFirst);
      expect(cp2.polls.some((q) => q.sinceVersion === '1' && q.waitMs === '30000')).toBe(true);
      const changed = nextTable(source);
      cp2.setRoutes({ a: 'cell-2', b: 'cell-1' });
      expect((await changed).version).toBe(2);
    } finally {
      source.close();
      await cp1.kill();
      await cp2.app.close();
    }
  });

  it('starts from the second instance when the first is down, and goes back round to the first when the second dies', async () => {
    const group = fakeMetaGroup();
    const cp1 = await fakeControlPlane(group);
    const cp2 = await fakeControlPlane(group);
    const port1 = Number(new URL(cp1.url).port);
    await cp1.kill();
    const source = new ControlPlaneRoutingSource({ baseUrl: [cp1.url, cp2.url], logger, waitMs: 5_000 });
    let back: FakeInstance | undefined;
    try {
      const followingSecond = cp2.parked();
      await source.start();
      expect(source.table().version).toBe(1);
      await followingSecond;
      expect(source.following()).toBe(cp2.url);

      // The first comes back on its port; the second dies: round robin leads back to the first.
      back = await fakeControlPlane(group, port1);
      const followingFirst = back.parked();
      await cp2.kill();
      await followingFirst;
      expect(source.following()).toBe(cp1.url);
      const changed = nextTable(source);
      group.setRoutes({ a: 'cell-2' });
      expect((await changed).routes.get('a')!.cell).toBe('cell-2');
    } finally {
      source.close();
      await back?.app.close();
    }
  });

  it('creates a tenant through the second instance while the first is down, or answers 503 NOT_LEADER', async () => {
    const group = fakeMetaGroup();
    const cp1 = await fakeControlPlane(group);
    const cp2 = await fakeControlPlane(group);
    const cp3 = await fakeControlPlane(group);
    await cp1.kill();
    cp2.noLeader = true;
    // Not started: no long poll moves the source first; the creation itself has to.
    const source = new ControlPlaneRoutingSource({ baseUrl: `${cp1.url},${cp2.url},${cp3.url}`, logger, waitMs: 5_000 });
    try {
      expect(source.following()).toBe(cp1.url);
      const t = await source.createTenant('newbie');
      expect(t.routes.get('newbie')!.cell).toBe('cell-2');
      expect(cp2.posts).toEqual([]); // refused in onRequest, before the handler
      expect(cp3.posts).toEqual(['newbie']);
      expect(group.created).toEqual(['newbie']);
      expect(source.following()).toBe(cp3.url);
      // A 400 is an answer: it is not retried elsewhere.
      await expect(source.createTenant('_bad')).rejects.toMatchObject({ code: 'INVALID_NAME' });
      expect(cp3.posts).toEqual(['newbie', '_bad']);
    } finally {
      source.close();
      await cp2.app.close();
      await cp3.app.close();
    }
  });

  it('retries a creation that got no answer on the next instance, and the tenant is created once', async () => {
    const group = fakeMetaGroup();
    const cp1 = await fakeControlPlane(group);
    const cp2 = await fakeControlPlane(group);
    cp1.dropNextCreateAnswer = true; // applied, then the connection drops: the source cannot know it was
    const source = new ControlPlaneRoutingSource({ baseUrl: `${cp1.url},${cp2.url}`, logger, waitMs: 5_000 });
    try {
      const t = await source.createTenant('twice');
      expect(t.routes.get('twice')!.cell).toBe('cell-2');
      expect(cp1.posts).toEqual(['twice']);
      expect(cp2.posts).toEqual(['twice']); // answered 409 TENANT_EXISTS, taken as created
      expect(group.created).toEqual(['twice']);
    } finally {
      source.close();
      await cp1.app.close();
      await cp2.app.close();
    }
  });

  it('gives up with NO_LEADER, naming the last fault, when no instance answers', async () => {
    const group = fakeMetaGroup();
    const cp1 = await fakeControlPlane(group);
    const cp2 = await fakeControlPlane(group);
    await cp1.kill();
    cp2.noLeader = true;
    const source = new ControlPlaneRoutingSource({ baseUrl: `${cp1.url},${cp2.url}`, logger, waitMs: 5_000 });
    try {
      await expect(source.createTenant('nobody')).rejects.toMatchObject({ code: 'NO_LEADER', message: /2 tried.*HTTP 503/ });
      expect(group.created).toEqual([]);
    } finally {
      source.close();
      await cp2.app.close();
    }
  });
});

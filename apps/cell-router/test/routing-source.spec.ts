/**
 * Goal: the routing table sources keep the promises the router relies on:
 * versions only grow, a broken or unreachable source leaves the last table
 * serving, the file is reloaded on change, auto-tenants places a namespace
 * on the cell with the fewest and rewrites the file atomically, and the
 * control-plane client speaks the contract's long poll and tenant creation,
 * and, given several control-plane instances, follows the next when the one
 * it follows dies or answers 5xx (long poll and tenant creation alike).
 * Method: a real file in a temp dir (changes seen through the source's own
 * stat polling, awaited as events); small fastify servers on 127.0.0.1:0
 * that speak the control plane's contract (GET /v1/routing with
 * sinceVersion/waitMs, GET /v1/fleet, POST /v1/tenants) over one shared
 * meta-group state, killed by closing them and destroying their sockets;
 * which instance the source follows is awaited as the long poll it parks.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import {
  ControlPlaneRoutingSource,
  FileRoutingSource,
  leastLoadedCell,
  parseRoutingFile,
  RoutingFormatError,
  parseRouterConfig,
  type RoutingTable,
} from '../src/index.js';
import { parseControlPlaneUrls } from '../src/routing-source.js';

const logger = pino({ level: 'silent' });
const cells = [
  { id: 'cell-1', replicas: ['127.0.0.1:7001', '127.0.0.1:7002'] },
  { id: 'cell-2', replicas: ['127.0.0.1:7011'] },
];
const file = (version: number, routes: Record<string, string>): string =>
  JSON.stringify({ version, cells, routes: Object.entries(routes).map(([namespace, cell]) => ({ namespace, cell, state: 'active' })) });

/** Resolves with the next table the source adopts. */
const nextTable = (s: { onChange(l: (t: RoutingTable) => void): void }): Promise<RoutingTable> =>
  new Promise((resolve) => s.onChange(resolve));

describe('parseRoutingFile', () => {
  it('reads cells and routes, and refuses what a router cannot route by', () => {
    const t = parseRoutingFile(JSON.parse(file(3, { payments: 'cell-2' })), 'f');
    expect(t.version).toBe(3);
    expect(t.routes.get('payments')).toEqual({ namespace: 'payments', cell: 'cell-2', state: 'active' });
    expect(t.cells.get('cell-1')!.replicas).toEqual(['127.0.0.1:7001', '127.0.0.1:7002']);
    for (const [bad, why] of [
      [{ version: -1, cells, routes: [] }, /version/],
      [{ version: 1, cells, routes: [{ namespace: 'a/b', cell: 'cell-1' }] }, /namespace/],
      [{ version: 1, cells, routes: [{ namespace: 'a', cell: 'cell-9' }] }, /does not list/],
      [
        {
          version: 1,
          cells,
          routes: [
            { namespace: 'a', cell: 'cell-1' },
            { namespace: 'a', cell: 'cell-2' },
          ],
        },
        /twice/,
      ],
      [{ version: 1, cells: [{ id: 'c', replicas: ['nope'] }], routes: [] }, /host:port/],
      [{ version: 1, cells, routes: [{ namespace: 'a', cell: 'cell-1', state: 'gone' }] }, /state/],
    ] as const) {
      expect(() => parseRoutingFile(bad, 'f')).toThrow(RoutingFormatError);
      expect(() => parseRoutingFile(bad, 'f')).toThrow(why);
    }
  });

  it('places a new namespace on the cell with the fewest namespaces', () => {
    expect(leastLoadedCell(parseRoutingFile(JSON.parse(file(1, { a: 'cell-1' })), 'f'))).toBe('cell-2');
    expect(leastLoadedCell(parseRoutingFile(JSON.parse(file(1, { a: 'cell-2' })), 'f'))).toBe('cell-1');
  });
});

describe('FileRoutingSource', () => {
  let dir = '';
  let source: FileRoutingSource | undefined;
  afterEach(() => {
    source?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reloads a changed file, adopts only higher versions, and keeps the last table when the file breaks', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'routing-'));
    const f = path.join(dir, 'routing.json');
    writeFileSync(f, file(1, { a: 'cell-1' }));
    source = new FileRoutingSource(f, logger, 20);
    await source.start();
    expect(source.table().version).toBe(1);

    let changed = nextTable(source);
    writeFileSync(f, file(2, { a: 'cell-2' }));
    expect((await changed).routes.get('a')!.cell).toBe('cell-2');

    // An older version and a broken file are both ignored: the table in force stays.
    writeFileSync(f, file(1, { a: 'cell-1' }));
    expect((await source.refresh()).version).toBe(2);
    writeFileSync(f, '{ not json');
    expect((await source.refresh()).routes.get('a')!.cell).toBe('cell-2');

    changed = nextTable(source);
    writeFileSync(f, file(5, { a: 'cell-1', b: 'cell-2' }));
    expect((await changed).version).toBe(5);
  });

  it('auto-tenants: creates each namespace once, on the least-loaded cell, and rewrites the file with a higher version', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'routing-'));
    const f = path.join(dir, 'routing.json');
    writeFileSync(f, file(1, { a: 'cell-1' }));
    source = new FileRoutingSource(f, logger, 20);
    await source.start();
    const [t1, t2] = await Promise.all([source.createTenant('fresh'), source.createTenant('fresh')]);
    expect(t1.routes.get('fresh')!.cell).toBe('cell-2');
    expect(t2.routes.get('fresh')!.cell).toBe('cell-2');
    const t3 = await source.createTenant('other');
    expect(t3.routes.get('other')!.cell).toBe('cell-1');
    const onDisk = parseRoutingFile(JSON.parse(readFileSync(f, 'utf8')), f);
    expect(onDisk.version).toBe(3);
    expect([...onDisk.routes.keys()].sort()).toEqual(['a', 'fresh', 'other']);
    // A second router sharing the file sees the same tables.
    const other = new FileRoutingSource(f, logger, 20);
    await other.start();
    expect(other.table().routes.get('fresh')!.cell).toBe('cell-2');
    other.close();
  });
});

/**
 * The state a control plane's meta group holds: the routing table, with the
 * long polls parked until it changes. Every fake instance serves the same
 * state, as the instances of one meta group do.
 */
function fakeMetaGroup(): {
  readonly version: number;
  setRoutes(routes: Record<string, string>): void;
  routes(): Record<string, string>;
  /** Tenants created, in order (a namespace twice would be a double creation). */
  readonly created: string[];
  park(waitMs: number): Promise<void>;
} {
  let version = 1;
  let routes: Record<string, string> = { a: 'cell-1' };
  const waiting: (() => void)[] = [];
  const created: string[] = [];
  return {
    get version() {
      return version;
    },
    routes: () => routes,
    created,
    setRoutes(r) {
      routes = r;
      version++;
      for (const w of waiting.splice(0)) w();
    },
    park: (waitMs) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

type MetaGroup = ReturnType<typeof fakeMetaGroup>;

interface FakeInstance {
  app: FastifyInstance;
  url: string;
  setRoutes(routes: Record<string, string>): void;
  polls: { sinceVersion?: string; waitMs?: string }[];
  /** Tenant creations this instance received. */
  posts: string[];
  /** Resolves when this instance holds a long poll parked (the source is following it). */
  parked(): Promise<void>;
  /** Answers every request with 503 NOT_LEADER, as an instance cut off from the meta group's leader does. */
  noLeader: boolean;
  /** Applies the next tenant creation, then drops the connection without answering. */
  dropNextCreateAnswer: boolean;
  /** Dies: the listener closes and every open connection (parked long polls included) is destroyed. */
  kill(): Promise<void>;
  /** Hangs, as a stopped process does: connections stay open, and nothing is answered any more (parked polls included). */
  hang(): void;
  /** GET /v1/health requests answered so far. */
  healthAnswers: number;
  /** Resolves once this many GET /v1/health requests have been answered. */
  healthAnswered(n: number): Promise<void>;
}

/** One control-plane instance on 127.0.0.1:0 that speaks the contract's routing and tenant endpoints over `group`. */
async function fakeControlPlane(group: MetaGroup = fakeMetaGroup(), port = 0): Promise<FakeInstance> {
  const polls: { sinceVersion?: string; waitMs?: string }[] = [];
  const parkedWaiters: (() => void)[] = [];
  const healthWaiters: { n: number; resolve: () => void }[] = [];
  let hung = false;
  const never = new Promise<never>(() => {});
  const app = Fastify();
  const body = () => ({
    version: group.version,
    routes: Object.entries(group.routes()).map(([namespace, cell]) => ({ namespace, cell, state: 'active' })),
  });
  const self: FakeInstance = {
    app,
    url: '',
    setRoutes: (r) => group.setRoutes(r),
    polls,
    posts: [],
    parked: () => new Promise((resolve) => parkedWaiters.push(resolve)),
    noLeader: false,
    dropNextCreateAnswer: false,
    kill: async () => {
      const closed = app.close();
      app.server.closeAllConnections();
      await closed;
    },
    hang: () => {
      hung = true;
    },
    healthAnswers: 0,
    healthAnswered: (n) => new Promise((resolve) => (self.healthAnswers >= n ? resolve() : healthWaiters.push({ n, resolve }))),
  };
  app.addHook('onRequest', async (_req, reply) => {
    if (hung) await never;
    if (self.noLeader)
      return reply
        .code(503)
        .type('application/problem+json')
        .send({ type: 'about:blank', title: 'no leader', status: 503, code: 'NOT_LEADER' });
  });
  app.get('/v1/health', async () => {
    self.healthAnswers++;
    for (const w of healthWaiters.filter((x) => x.n <= self.healthAnswers)) {
      healthWaiters.splice(healthWaiters.indexOf(w), 1);
      w.resolve();
    }
    return { ok: true };
  });
  app.get('/v1/fleet', async () => ({
    routingVersion: group.version,
    cells: cells.map((c) => ({
      id: c.id,
      namespaces: [],
      replicas: c.replicas.map((grpc, i) => ({ id: `${c.id}-r${i + 1}`, grpc, role: 'follower' })),
    })),
  }));
  app.get<{ Querystring: { sinceVersion?: string; waitMs?: string } }>('/v1/routing', async (req) => {
    polls.push(req.query);
    const since = req.query.sinceVersion === undefined ? undefined : Number(req.query.sinceVersion);
    if (since !== undefined && since >= group.version) {
      const parking = group.park(Number(req.query.waitMs ?? 0));
      for (const w of parkedWaiters.splice(0)) w();
      await parking;
      if (hung) await never;
    }
    return body();
  });
  app.post<{ Body: { namespace: string } }>('/v1/tenants', async (req, reply) => {
    self.posts.push(req.body.namespace);
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(req.body.namespace))
      return reply
        .code(400)
        .type('application/problem+json')
        .send({ type: 'about:blank', title: 'bad', status: 400, code: 'INVALID_REQUEST', detail: 'bad namespace' });
    if (group.routes()[req.body.namespace])
      return reply.code(409).send({ type: 'about:blank', title: 'exists', status: 409, code: 'TENANT_EXISTS' });
    group.created.push(req.body.namespace);
    group.setRoutes({ ...group.routes(), [req.body.namespace]: 'cell-2' });
    if (self.dropNextCreateAnswer) {
      self.dropNextCreateAnswer = false;
      req.raw.socket.destroy();
      return reply.hijack();
    }
    return reply.code(201).send({ namespace: req.body.namespace, cell: 'cell-2', createdAt: new Date().toISOString() });
  });
  self.url = await app.listen({ host: '127.0.0.1', port });
  return self;
}

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

describe('--control-plane URL[,URL...]', () => {
  it('takes one URL or several, and refuses entries a router cannot follow', () => {
    expect(parseControlPlaneUrls('http://127.0.0.1:7400')).toEqual(['http://127.0.0.1:7400']);
    expect(parseControlPlaneUrls('http://127.0.0.1:7400, http://127.0.0.1:7401')).toEqual([
      'http://127.0.0.1:7400',
      'http://127.0.0.1:7401',
    ]);
    expect(parseRouterConfig(['--control-plane', 'http://a:1,https://b:2']).controlPlane).toBe('http://a:1,https://b:2');
    for (const [bad, why] of [
      ['http://a:1,', /not a URL/],
      ['a:1', /not an http/],
      ['ftp://a:1', /not an http/],
      ['http://a:1,http://a:1', /twice/],
      ['http://user:secret@a:1', /FENCER_CONTROL_PLANE_TOKEN/],
    ] as const) {
      expect(() => parseControlPlaneUrls(bad)).toThrow(why);
      expect(() => parseRouterConfig(['--control-plane', bad])).toThrow(why);
    }
  });
});

/** The control plane back after an outage, at version 7. */
async function fakeControlPlane2(port: number): Promise<FastifyInstance> {
  const app = Fastify();
  app.get('/v1/fleet', async () => ({
    routingVersion: 7,
    cells: cells.map((c) => ({ id: c.id, namespaces: [], replicas: c.replicas.map((grpc) => ({ id: grpc, grpc, role: 'follower' })) })),
  }));
  app.get('/v1/routing', async () => ({
    version: 7,
    routes: [
      { namespace: 'a', cell: 'cell-1', state: 'active' },
      { namespace: 'b', cell: 'cell-2', state: 'active' },
    ],
  }));
  await app.listen({ host: '127.0.0.1', port });
  return app;
}

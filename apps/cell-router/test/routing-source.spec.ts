/**
 * Goal: the routing table sources keep the promises the router relies on:
 * versions only grow, a broken or unreachable source leaves the last table
 * serving, the file is reloaded on change, auto-tenants places a namespace
 * on the cell with the fewest and rewrites the file atomically, and the
 * control-plane client speaks the contract's long poll and tenant creation.
 * Method: a real file in a temp dir (changes seen through the source's own
 * stat polling, awaited as events); a small fastify server on 127.0.0.1:0
 * that speaks the control plane's contract (GET /v1/routing with
 * sinceVersion/waitMs, GET /v1/fleet, POST /v1/tenants).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import {
  ControlPlaneRoutingSource,
  FileRoutingSource,
  leastLoadedCell,
  parseRoutingFile,
  RoutingFormatError,
  type RoutingTable,
} from '../src/index.js';

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

/** A small control plane that speaks the contract's routing and tenant endpoints. */
async function fakeControlPlane(): Promise<{
  app: FastifyInstance;
  url: string;
  setRoutes(routes: Record<string, string>): void;
  polls: { sinceVersion?: string; waitMs?: string }[];
}> {
  let version = 1;
  let routes: Record<string, string> = { a: 'cell-1' };
  const waiting: (() => void)[] = [];
  const polls: { sinceVersion?: string; waitMs?: string }[] = [];
  const body = () => ({ version, routes: Object.entries(routes).map(([namespace, cell]) => ({ namespace, cell, state: 'active' })) });
  const setRoutes = (r: Record<string, string>): void => {
    routes = r;
    version++;
    for (const w of waiting.splice(0)) w();
  };
  const app = Fastify();
  app.get('/v1/fleet', async () => ({
    routingVersion: version,
    cells: cells.map((c) => ({
      id: c.id,
      namespaces: [],
      replicas: c.replicas.map((grpc, i) => ({ id: `${c.id}-r${i + 1}`, grpc, role: 'follower' })),
    })),
  }));
  app.get<{ Querystring: { sinceVersion?: string; waitMs?: string } }>('/v1/routing', async (req) => {
    polls.push(req.query);
    const since = req.query.sinceVersion === undefined ? undefined : Number(req.query.sinceVersion);
    if (since !== undefined && since >= version) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Number(req.query.waitMs ?? 0));
        waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return body();
  });
  app.post<{ Body: { namespace: string } }>('/v1/tenants', async (req, reply) => {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(req.body.namespace))
      return reply
        .code(400)
        .type('application/problem+json')
        .send({ type: 'about:blank', title: 'bad', status: 400, code: 'INVALID_REQUEST', detail: 'bad namespace' });
    if (routes[req.body.namespace])
      return reply.code(409).send({ type: 'about:blank', title: 'exists', status: 409, code: 'TENANT_EXISTS' });
    setRoutes({ ...routes, [req.body.namespace]: 'cell-2' });
    return reply.code(201).send({ namespace: req.body.namespace, cell: 'cell-2', createdAt: new Date().toISOString() });
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url, setRoutes, polls };
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

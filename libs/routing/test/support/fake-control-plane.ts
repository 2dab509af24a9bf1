/**
 * Fakes of the control plane for the routing sources' tests: a meta group's
 * routing state, and instances on 127.0.0.1:0 that speak the contract's
 * routing and tenant endpoints over it and can die, hang or lose their
 * leader on demand.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { RoutingTable } from '@fencer/contract';

/** The cells every fake table lists. */
export const cells = [
  { id: 'cell-1', replicas: ['127.0.0.1:7001', '127.0.0.1:7002'] },
  { id: 'cell-2', replicas: ['127.0.0.1:7011'] },
];

/** A routing file's text: `cells` and the routes given (namespace -> cell). */
export const file = (version: number, routes: Record<string, string>): string =>
  JSON.stringify({ version, cells, routes: Object.entries(routes).map(([namespace, cell]) => ({ namespace, cell, state: 'active' })) });

/** Resolves with the next table the source adopts. */
export const nextTable = (s: { onChange(l: (t: RoutingTable) => void): void }): Promise<RoutingTable> =>
  new Promise((resolve) => s.onChange(resolve));

/**
 * The state a control plane's meta group holds: the routing table, with the
 * long polls parked until it changes. Every fake instance serves the same
 * state, as the instances of one meta group do.
 */
export function fakeMetaGroup(): {
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

export type MetaGroup = ReturnType<typeof fakeMetaGroup>;

export interface FakeInstance {
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
export async function fakeControlPlane(group: MetaGroup = fakeMetaGroup(), port = 0): Promise<FakeInstance> {
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

/** The control plane back after an outage, at version 7. */
export async function fakeControlPlane2(port: number): Promise<FastifyInstance> {
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

/**
 * In-process control plane for tests: a real one-member meta group (WAL on a
 * temporary directory, real fsync) under the real app, with a fake cell
 * directory that records claims and drops, and a validator that checks every
 * response against openapi/openapi.yaml.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ValidateFunction } from 'ajv';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { NodeId, SeededRandom } from '@fencer/base';
import type { MetaLimits } from '@fencer/meta-fsm';
import { openRaftLogStore, type WalStore } from '@fencer/wal';
import { NodeDisk } from '@fencer/wal/node';
import {
  absoluteRefs,
  buildApp,
  contractAjv,
  CONTRACT_SCHEMA_ID,
  MetaGroup,
  openapi,
  ProblemError,
  type CellDirectory,
  type CellView,
  type DropResult,
  type NamespaceExport,
  CellRefusal,
  type WatchClientFactory,
} from '../../src/index.js';
import type { adminpb } from '@fencer/protocol';
import type { TlsFiles } from '@fencer/service';

export class FakeCells implements CellDirectory {
  /** cell → namespaces it owns, with their live sessions. */
  readonly owned = new Map<string, Map<string, number>>();
  /** Namespaces frozen, as `cell/namespace`. */
  readonly frozen = new Set<string>();
  readonly sessions = new Map<string, number>();
  unavailable = false;
  /** Cells that answer nothing (CELL_UNAVAILABLE), beside `unavailable` for all. */
  readonly down = new Set<string>();
  /** What the target imports at most (NamespaceStatus's importBytesMax); exports weigh 100 bytes a session. */
  importBytesMax = 1_000_000;
  readonly calls: string[] = [];
  /** Quotas each namespace's cell holds, as `cell/namespace`; none until setQuotas. */
  readonly quotas = new Map<string, adminpb.NamespaceQuotas>();
  /** The fence each move call carried, in call order (`calls` has the calls). */
  readonly fences: (adminpb.MoveFence | undefined)[] = [];
  /** Move calls with a fence term below this are refused MOVE_FENCED, as a cell that applied a newer leader's step. */
  fencedBelowTerm = 0;
  /** Token hashes each namespace's cell holds, as `cell/namespace`; none until setCredentials. */
  readonly credentials = new Map<string, adminpb.CredentialHash[]>();

  constructor(ids: readonly string[]) {
    for (const id of ids) this.owned.set(id, new Map());
  }
  cellIds(): readonly string[] {
    return [...this.owned.keys()];
  }
  has(cell: string): boolean {
    return this.owned.has(cell);
  }
  async claim(cell: string, namespace: string): Promise<void> {
    this.calls.push(`claim ${cell} ${namespace}`);
    if (this.unavailable) throw new ProblemError('CELL_UNAVAILABLE', `cell ${cell} did not answer`);
    const owned = this.owned.get(cell)!;
    if (!owned.has(namespace)) owned.set(namespace, 0);
  }
  async drop(cell: string, namespace: string, force: boolean, fence?: adminpb.MoveFence): Promise<DropResult> {
    this.calls.push(`drop ${cell} ${namespace} ${force}`);
    this.fenced(cell, fence);
    if (this.unavailable) throw new ProblemError('CELL_UNAVAILABLE', `cell ${cell} did not answer`);
    const owned = this.owned.get(cell)!;
    const live = owned.get(namespace);
    if (live === undefined) return 'not-owned';
    if (live > 0 && !force) return 'not-empty';
    owned.delete(namespace);
    this.frozen.delete(`${cell}/${namespace}`);
    this.quotas.delete(`${cell}/${namespace}`);
    this.credentials.delete(`${cell}/${namespace}`);
    return 'dropped';
  }
  private answering(cell: string): Map<string, number> {
    if (this.unavailable || this.down.has(cell)) throw new ProblemError('CELL_UNAVAILABLE', `cell ${cell} did not answer`);
    return this.owned.get(cell)!;
  }
  private holding(cell: string, namespace: string): number {
    const live = this.answering(cell).get(namespace);
    if (live === undefined) throw new CellRefusal(cell, 'NAMESPACE_NOT_HERE', `cell ${cell} does not own ${namespace}`);
    return live;
  }
  async setQuotas(cell: string, namespace: string, quotas: adminpb.NamespaceQuotas): Promise<void> {
    this.calls.push(`quotas ${cell} ${namespace} ${quotas.maxSessions}/${quotas.maxLocks}/${quotas.maxWaiters}`);
    this.holding(cell, namespace);
    if (this.frozen.has(`${cell}/${namespace}`)) throw new ProblemError('CELL_UNAVAILABLE', `${namespace} is frozen for a move`);
    this.quotas.set(`${cell}/${namespace}`, { ...quotas });
  }
  async setCredentials(cell: string, namespace: string, credentials: adminpb.CredentialHash[]): Promise<void> {
    this.calls.push(`credentials ${cell} ${namespace} ${credentials.length}`);
    this.holding(cell, namespace);
    if (this.frozen.has(`${cell}/${namespace}`)) throw new ProblemError('CELL_UNAVAILABLE', `${namespace} is frozen for a move`);
    this.credentials.set(
      `${cell}/${namespace}`,
      credentials.map((c) => ({ ...c })),
    );
  }
  private quotasOf(cell: string, namespace: string): adminpb.NamespaceQuotas {
    return this.quotas.get(`${cell}/${namespace}`) ?? { maxSessions: 0, maxLocks: 0, maxWaiters: 0 };
  }
  private fenced(cell: string, fence: adminpb.MoveFence | undefined): void {
    this.fences.push(fence);
    if (fence !== undefined && fence.term < this.fencedBelowTerm)
      throw new CellRefusal(
        cell,
        'MOVE_FENCED',
        `a step of move ${fence.moveId} at term ${fence.term} is older than term ${this.fencedBelowTerm}`,
      );
  }
  async freeze(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<{ changed: boolean; namespaceRevision: number }> {
    this.calls.push(`freeze ${cell} ${namespace}`);
    this.fenced(cell, fence);
    this.holding(cell, namespace);
    const changed = !this.frozen.has(`${cell}/${namespace}`);
    this.frozen.add(`${cell}/${namespace}`);
    return { changed, namespaceRevision: 42 };
  }
  async unfreeze(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<{ changed: boolean }> {
    this.calls.push(`unfreeze ${cell} ${namespace}`);
    this.fenced(cell, fence);
    this.holding(cell, namespace);
    return { changed: this.frozen.delete(`${cell}/${namespace}`) };
  }
  async exportNamespace(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<NamespaceExport> {
    this.calls.push(`export ${cell} ${namespace}`);
    this.fenced(cell, fence);
    const live = this.holding(cell, namespace);
    if (!this.frozen.has(`${cell}/${namespace}`)) throw new CellRefusal(cell, 'INVALID_ARGUMENT', 'freeze it first');
    return { data: Uint8Array.of(live), highestRevision: 50, namespaceRevision: 42, sessions: live, locks: 2 * live, waitsLeft: [] };
  }
  async importNamespace(cell: string, namespace: string, exported: NamespaceExport, fence?: adminpb.MoveFence) {
    this.calls.push(`import ${cell} ${namespace}`);
    this.fenced(cell, fence);
    const owned = this.answering(cell);
    if (owned.has(namespace)) return { sessions: owned.get(namespace)!, locks: 0, already: true };
    owned.set(namespace, exported.sessions);
    this.frozen.add(`${cell}/${namespace}`);
    return { sessions: exported.sessions, locks: exported.locks, already: false };
  }
  async namespaceStatus(cell: string, namespace: string, exportSize: boolean): Promise<adminpb.NamespaceStatusResponse> {
    const live = this.answering(cell).get(namespace);
    const state = live === undefined ? 'absent' : this.frozen.has(`${cell}/${namespace}`) ? 'frozen' : 'active';
    return {
      state,
      lastRevision: 42,
      sessions: live ?? 0,
      locks: 0,
      waiters: 0,
      quotas: this.quotasOf(cell, namespace),
      exportBytes: exportSize ? 100 * (live ?? 0) : 0,
      importBytesMax: this.importBytesMax,
      revision: 60,
      unfrozenHere: state === 'active',
      unfrozenAgoMs: 20,
      firstWriteSeen: state === 'active',
      firstWriteAfterMs: 7,
    };
  }
  async listNamespaces(cell: string): Promise<readonly adminpb.NamespaceEntry[]> {
    return [...this.answering(cell)].map(([namespace, sessions]) => ({
      namespace,
      state: 'active',
      sessions,
      locks: 2 * sessions,
      waiters: sessions,
      quotas: this.quotasOf(cell, namespace),
      credentials: this.credentials.get(`${cell}/${namespace}`) ?? [],
    }));
  }
  status(): readonly CellView[] {
    return this.cellIds().map((id, i) => ({
      id,
      leader: `${id}-r1`,
      term: 3,
      sessions: this.sessions.get(id) ?? 0,
      leaderChangesLastHour: 0,
      replicas: [
        {
          id: `${id}-r1`,
          grpc: `127.0.0.1:${7001 + i}`,
          role: 'leader' as const,
          term: 3,
          commitIndex: 10,
          appliedIndex: 10,
          lastSeenMs: 5,
        },
        { id: `${id}-r2`, grpc: `127.0.0.1:${7101 + i}`, role: 'unreachable' as const, lastSeenMs: 4000 },
      ],
    }));
  }
  close(): void {}
}

export interface Harness {
  readonly app: FastifyInstance;
  readonly group: MetaGroup;
  readonly cells: FakeCells;
  close(): Promise<void>;
}

export async function openStore(dir: string): Promise<WalStore> {
  return new Promise((resolve, reject) => openRaftLogStore(new NodeDisk(), dir, {}, (err, s) => (err || !s ? reject(err) : resolve(s))));
}

export async function startHarness(
  opts: {
    adminToken?: string;
    frontEndToken?: string;
    cells?: string[];
    dataDir?: string;
    limits?: Partial<MetaLimits>;
    snapshotEveryEntries?: number;
    newWatchClient?: WatchClientFactory;
    /** Serve HTTPS with these files (the control plane's --tls-* flags). */
    https?: TlsFiles;
  } = {},
): Promise<Harness> {
  const dir = opts.dataDir ?? mkdtempSync(path.join(tmpdir(), 'fencer-cp-'));
  const store = await openStore(dir);
  const id = NodeId('cp1');
  const group = new MetaGroup(
    {
      id,
      peers: new Map([[id, 'http://127.0.0.1:1']]),
      raft: { electionTicks: 4 },
      ...(opts.limits ? { limits: opts.limits } : {}),
      ...(opts.snapshotEveryEntries ? { snapshotEveryEntries: opts.snapshotEveryEntries } : {}),
    },
    store,
    {
      clock: { monoMs: () => performance.now(), wallMs: () => Date.now() },
      random: new SeededRandom(1),
      send: () => {},
      onFatal: (e) => {
        throw e;
      },
      after: (ms, run) => {
        const timer = setTimeout(run, ms);
        return () => clearTimeout(timer);
      },
    },
  );
  const ticker = setInterval(() => group.tick(), 5);
  group.replica.campaign();
  const deadline = performance.now() + 10_000;
  while (!group.isLeader) {
    if (performance.now() > deadline) throw new Error('the one-member meta group elected no leader in 10 s');
    await new Promise((r) => setTimeout(r, 5));
  }
  const cells = new FakeCells(opts.cells ?? ['cell-1', 'cell-2']);
  let n = 0;
  const app = await buildApp({
    meta: group,
    cells,
    newId: () => `id-${++n}`,
    ...(opts.adminToken !== undefined ? { adminToken: opts.adminToken } : {}),
    ...(opts.newWatchClient !== undefined ? { newWatchClient: opts.newWatchClient } : {}),
    ...(opts.frontEndToken !== undefined ? { frontEndToken: opts.frontEndToken } : {}),
    ...(opts.https !== undefined ? { https: opts.https } : {}),
  });
  return {
    app,
    group,
    cells,
    async close() {
      await app.close();
      clearInterval(ticker);
      await new Promise<void>((resolve, reject) => group.close((err) => (err ? reject(err) : resolve())));
      if (opts.dataDir === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------- contract

const ajv = contractAjv({ coerceTypes: false, allErrors: true });
const problemValidator = ajv.compile({ $ref: `${CONTRACT_SCHEMA_ID}#/components/schemas/Problem` });
const validators = new Map<string, ValidateFunction>();

/** The contract's operation for a concrete path ('/v1/tenants/abc' → '/v1/tenants/{namespace}'). */
export function operationOf(url: string): string | undefined {
  const pathname = url.split('?')[0]!;
  for (const template of Object.keys(openapi.paths)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (re.test(pathname)) return template;
  }
  return undefined;
}

export const seen = { responses: 0, codes: new Set<string>(), operations: new Set<string>() };

/**
 * Checks one response against the contract: a success has a status the
 * operation declares and a body its schema accepts; an error is a problem
 * document (application/problem+json) that the Problem schema accepts, with
 * the status in the body equal to the HTTP status.
 */
export function checkContract(method: string, url: string, res: LightMyRequestResponse): void {
  seen.responses++;
  const template = operationOf(url);
  if (res.statusCode >= 400) {
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const body = res.json();
    expect(problemValidator(body), JSON.stringify(problemValidator.errors)).toBe(true);
    expect(body.status).toBe(res.statusCode);
    seen.codes.add(body.code);
    return;
  }
  expect(template, `${url} is a path of the contract`).toBeDefined();
  const op = (openapi.paths[template!] as Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>)[
    method.toLowerCase()
  ];
  expect(op, `${method} ${template} is an operation of the contract`).toBeDefined();
  const declared = op!.responses[String(res.statusCode)];
  expect(declared, `${method} ${template} declares status ${res.statusCode}`).toBeDefined();
  seen.operations.add(`${method} ${template}`);
  const schema = declared!.content?.['application/json']?.schema;
  if (schema === undefined) return;
  const key = `${method} ${template} ${res.statusCode}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = ajv.compile(absoluteRefs(schema) as object);
    validators.set(key, validate);
  }
  expect(validate(res.json()), `${key}: ${JSON.stringify(validate.errors)}`).toBe(true);
}

/** inject() and checkContract() in one. */
export async function call(
  app: FastifyInstance,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT',
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  const res = await app.inject({
    method,
    url,
    headers: body !== undefined ? { 'content-type': 'application/json', ...headers } : headers,
    ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
  });
  checkContract(method, url, res);
  return res;
}

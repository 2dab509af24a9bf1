/**
 * The cells this control plane manages, seen through each replica's admin
 * API (apps/cell-node): status followed by polling, and the namespace claims
 * and drops that make a cell own what the routing table says.
 */
import { type ChannelCredentials, credentials, Metadata, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import { adminpb } from '@fencer/protocol';
import { ProblemError } from './problems.js';
import { cellCallTimeoutMs } from './limits.js';

export interface CellReplicaPlan {
  readonly id: string;
  /** The lock service's gRPC address. */
  readonly grpc: string;
  /** The admin gRPC address. */
  readonly admin: string;
}

export interface CellPlan {
  readonly id: string;
  readonly replicas: readonly CellReplicaPlan[];
}

export type ReplicaRole = 'leader' | 'follower' | 'learner' | 'candidate' | 'unreachable';

export interface ReplicaView {
  readonly id: string;
  readonly grpc: string;
  readonly role: ReplicaRole;
  readonly term?: number;
  readonly commitIndex?: number;
  readonly appliedIndex?: number;
  /** Ms since this replica last answered; absent when it never did. */
  readonly lastSeenMs?: number;
}

export interface CellView {
  readonly id: string;
  readonly leader: string | null;
  readonly term?: number;
  /** Live sessions, as the leader last reported them (placement picks the fewest). */
  readonly sessions: number;
  readonly replicas: readonly ReplicaView[];
}

export type DropResult = 'dropped' | 'not-owned' | 'not-empty';

/** A namespace as its cell's leader sees it (the admin API's NamespaceStatus). */
export type NamespaceView = adminpb.NamespaceStatusResponse;
/** The whole export of a frozen namespace, read page by page from the source's leader. */
export interface NamespaceExport {
  readonly data: Uint8Array;
  readonly highestRevision: number;
  readonly namespaceRevision: number;
  readonly sessions: number;
  readonly locks: number;
  readonly waitsLeft: readonly adminpb.WaitLeft[];
}
/** What a tenant move asks of the cells (docs/decisions/0019-the-move-worker.md); each call is safe to repeat. */
export interface MoveCells {
  freeze(cell: string, namespace: string): Promise<{ changed: boolean; namespaceRevision: number }>;
  unfreeze(cell: string, namespace: string): Promise<{ changed: boolean }>;
  exportNamespace(cell: string, namespace: string): Promise<NamespaceExport>;
  importNamespace(
    cell: string,
    namespace: string,
    exported: NamespaceExport,
  ): Promise<{ sessions: number; locks: number; already: boolean }>;
  namespaceStatus(cell: string, namespace: string, exportSize: boolean): Promise<NamespaceView>;
  /** Every namespace record the cell's leader holds. */
  listNamespaces(cell: string): Promise<readonly adminpb.NamespaceEntry[]>;
  /** Drops the namespace on the cell (idempotent); 'not-empty' when it has live sessions and `force` is off. */
  drop(cell: string, namespace: string, force: boolean): Promise<DropResult>;
}

/** The seam the HTTP app and the leader tasks use; tests pass a fake. */
export interface CellDirectory extends MoveCells {
  cellIds(): readonly string[];
  has(cell: string): boolean;
  /** Makes the cell own the namespace (idempotent). Throws ProblemError CELL_UNAVAILABLE when no leader answers. */
  claim(cell: string, namespace: string): Promise<void>;
  /** Every cell as last polled. */
  status(): readonly CellView[];
  close(): void;
}

interface Followed {
  readonly plan: CellReplicaPlan;
  readonly client: adminpb.CellAdminClient;
  last?: adminpb.StatusResponse;
  /** Monotonic ms of the last answer; undefined: never answered. */
  lastOkMonoMs?: number;
  failing: boolean;
}

const ROLE_OF: Record<string, ReplicaRole> = {
  leader: 'leader',
  follower: 'follower',
  candidate: 'candidate',
  'pre-candidate': 'candidate',
};

/** Follows the cells' replicas over their admin gRPC API. */
export class GrpcCellDirectory implements CellDirectory {
  private readonly cells = new Map<string, Followed[]>();
  private readonly timer: NodeJS.Timeout;
  private polling = false;

  constructor(
    plans: readonly CellPlan[],
    private readonly monoMs: () => number,
    pollMs: number,
    /** How the cells' admin ports are reached: with TLS, this control plane's certificate. */
    cellCredentials: ChannelCredentials = credentials.createInsecure(),
  ) {
    for (const plan of plans) {
      this.cells.set(
        plan.id,
        plan.replicas.map((r) => ({ plan: r, client: new adminpb.CellAdminClient(r.admin, cellCredentials), failing: false })),
      );
    }
    this.timer = setInterval(() => void this.poll(), pollMs);
    this.timer.unref();
    void this.poll();
  }

  cellIds(): readonly string[] {
    return [...this.cells.keys()];
  }

  has(cell: string): boolean {
    return this.cells.has(cell);
  }

  /** One Status round over every replica (skipped while the previous one runs). */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      await Promise.all(
        [...this.cells.values()].flat().map(async (f) => {
          try {
            f.last = await unary<adminpb.StatusRequest, adminpb.StatusResponse>(f.client, 'status', {});
            f.lastOkMonoMs = this.monoMs();
            f.failing = false;
          } catch {
            f.failing = true;
          }
        }),
      );
    } finally {
      this.polling = false;
    }
  }

  status(): readonly CellView[] {
    const now = this.monoMs();
    return [...this.cells.entries()].map(([id, replicas]) => {
      const leader = replicas.find((f) => !f.failing && f.last?.role === 'leader');
      return {
        id,
        leader: leader ? leader.plan.id : null,
        ...(leader?.last ? { term: leader.last.term } : {}),
        sessions: leader?.last?.sessions ?? 0,
        replicas: replicas.map((f): ReplicaView => {
          const st = f.last;
          const learner = st?.members.some((m) => m.id === f.plan.id && !m.voter) ?? false;
          const role: ReplicaRole = f.failing || st === undefined ? 'unreachable' : learner ? 'learner' : (ROLE_OF[st.role] ?? 'follower');
          return {
            id: f.plan.id,
            grpc: f.plan.grpc,
            role,
            ...(st ? { term: st.term, commitIndex: st.commitIndex, appliedIndex: st.appliedIndex } : {}),
            ...(f.lastOkMonoMs !== undefined ? { lastSeenMs: Math.max(0, Math.round(now - f.lastOkMonoMs)) } : {}),
          };
        }),
      };
    });
  }

  async claim(cell: string, namespace: string): Promise<void> {
    await asUnavailable(this.onLeader(cell, (client) => unary(client, 'claimNamespace', { namespace })));
  }

  async drop(cell: string, namespace: string, force: boolean): Promise<DropResult> {
    try {
      const r = await asUnavailable(
        this.onLeader(cell, (client) =>
          unary<adminpb.DropNamespaceRequest, adminpb.DropNamespaceResponse>(client, 'dropNamespace', { namespace, force }),
        ),
      );
      return r.dropped ? 'dropped' : 'not-owned';
    } catch (e) {
      if (isServiceError(e) && e.code === grpcStatus.FAILED_PRECONDITION && reasonOf(e) === 'NAMESPACE_NOT_EMPTY') return 'not-empty';
      throw e;
    }
  }

  async freeze(cell: string, namespace: string): Promise<{ changed: boolean; namespaceRevision: number }> {
    return this.onLeader(cell, (c) =>
      unary<adminpb.FreezeNamespaceRequest, adminpb.FreezeNamespaceResponse>(c, 'freezeNamespace', { namespace }),
    );
  }

  async unfreeze(cell: string, namespace: string): Promise<{ changed: boolean }> {
    return this.onLeader(cell, (c) =>
      unary<adminpb.UnfreezeNamespaceRequest, adminpb.UnfreezeNamespaceResponse>(c, 'unfreezeNamespace', { namespace }),
    );
  }

  /** Page by page from one leader; a leader change midway (another export) starts it over. */
  async exportNamespace(cell: string, namespace: string): Promise<NamespaceExport> {
    return this.onLeader(cell, async (c) => {
      const page = (offset: number) =>
        unary<adminpb.ExportNamespaceRequest, adminpb.ExportNamespaceResponse>(c, 'exportNamespace', { namespace, offset });
      const first = await page(0);
      const data = new Uint8Array(first.totalBytes);
      data.set(first.data, 0);
      let at = first.data.length;
      while (at < first.totalBytes) {
        const next = await page(at);
        if (next.highestRevision !== first.highestRevision || next.data.length === 0)
          throw new ProblemError('CELL_UNAVAILABLE', `the export of ${namespace} changed midway; read it again`);
        data.set(next.data, at);
        at += next.data.length;
      }
      const { highestRevision, namespaceRevision, sessions, locks, waitsLeft } = first;
      return { data, highestRevision, namespaceRevision, sessions, locks, waitsLeft };
    });
  }

  /** Piece by piece to one leader (the staged pieces are replicated, so a new leader takes over from offset 0). */
  async importNamespace(
    cell: string,
    namespace: string,
    exported: NamespaceExport,
  ): Promise<{ sessions: number; locks: number; already: boolean }> {
    return this.onLeader(cell, async (c) => {
      const total = exported.data.length;
      for (let offset = 0; ; offset += IMPORT_PIECE_BYTES) {
        const last = offset + IMPORT_PIECE_BYTES >= total;
        const r = await unary<adminpb.ImportNamespaceRequest, adminpb.ImportNamespaceResponse>(c, 'importNamespace', {
          namespace,
          data: exported.data.subarray(offset, offset + IMPORT_PIECE_BYTES),
          offset,
          totalBytes: total,
          activate: false,
          waitsLeft: last ? [...exported.waitsLeft] : [],
        });
        if (r.done) return { sessions: r.sessions, locks: r.locks, already: r.already };
        if (last) throw new ProblemError('CELL_UNAVAILABLE', `the import of ${namespace} did not complete; import it again`);
      }
    });
  }

  async namespaceStatus(cell: string, namespace: string, exportSize: boolean): Promise<NamespaceView> {
    return this.onLeader(cell, (c) =>
      unary<adminpb.NamespaceStatusRequest, adminpb.NamespaceStatusResponse>(c, 'namespaceStatus', { namespace, exportSize }),
    );
  }

  async listNamespaces(cell: string): Promise<readonly adminpb.NamespaceEntry[]> {
    const r = await this.onLeader(cell, (c) =>
      unary<adminpb.ListNamespacesRequest, adminpb.ListNamespacesResponse>(c, 'listNamespaces', {}),
    );
    return r.namespaces;
  }

  /** Runs `call` on the cell's leader: the last known one first, then every replica, twice at most. */
  private async onLeader<T>(cell: string, call: (client: adminpb.CellAdminClient) => Promise<T>): Promise<T> {
    const replicas = this.cells.get(cell);
    if (replicas === undefined) throw new ProblemError('CELL_NOT_FOUND', `no cell "${cell}" in this control plane's cell list`);
    const ordered = [...replicas].sort((a, b) => Number(b.last?.role === 'leader') - Number(a.last?.role === 'leader'));
    let lastError = '';
    for (let round = 0; round < 2; round++) {
      for (const f of ordered) {
        try {
          return await call(f.client);
        } catch (e) {
          if (isServiceError(e) && e.code === grpcStatus.FAILED_PRECONDITION && reasonOf(e) === 'NAMESPACE_NOT_EMPTY') throw e;
          // The leader refused the call itself (bad input, a limit, not its namespace): another replica would only forward it.
          if (isServiceError(e) && REFUSALS.has(e.code)) throw new CellRefusal(cell, reasonOf(e) ?? grpcStatus[e.code], e.details);
          lastError = `${f.plan.id}: ${(e as Error).message}`;
        }
      }
    }
    throw new ProblemError(
      'CELL_UNAVAILABLE',
      `no leader of cell ${cell} took the call (last: ${lastError}); retry with the same Idempotency-Key`,
    );
  }

  close(): void {
    clearInterval(this.timer);
    for (const f of [...this.cells.values()].flat()) f.client.close();
  }
}

/** Pieces of an import, far below the cell's proposal limit (1 MiB) and its 512 KiB piece limit. */
const IMPORT_PIECE_BYTES = 512 * 1024;

/** gRPC statuses that are the leader's own answer, not a replica that cannot serve. */
const REFUSALS = new Set<grpcStatus>([grpcStatus.INVALID_ARGUMENT, grpcStatus.RESOURCE_EXHAUSTED, grpcStatus.FAILED_PRECONDITION]);

/** A cell's leader refused the call: repeating it unchanged will not help. */
export class CellRefusal extends Error {
  override readonly name = 'CellRefusal';
  constructor(
    readonly cell: string,
    readonly reason: string,
    readonly detail: string,
  ) {
    super(`cell ${cell} refused: ${reason}: ${detail}`);
  }
}

/** The HTTP API's word for a cell that would not do it: 503 CELL_UNAVAILABLE, as for one that did not answer. */
async function asUnavailable<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof CellRefusal) throw new ProblemError('CELL_UNAVAILABLE', e.message);
    throw e;
  }
}

function isServiceError(e: unknown): e is ServiceError {
  return typeof e === 'object' && e !== null && typeof (e as ServiceError).code === 'number';
}

function reasonOf(e: ServiceError): string | undefined {
  const v = (e.metadata as Metadata | undefined)?.get('lock-reason')[0];
  return typeof v === 'string' ? v : undefined;
}

function unary<Req, Res>(
  client: adminpb.CellAdminClient,
  method:
    | 'status'
    | 'claimNamespace'
    | 'dropNamespace'
    | 'freezeNamespace'
    | 'unfreezeNamespace'
    | 'exportNamespace'
    | 'importNamespace'
    | 'namespaceStatus'
    | 'listNamespaces',
  request: Req,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const fn = client[method].bind(client) as unknown as (
      r: Req,
      m: Metadata,
      o: { deadline: number },
      cb: (e: ServiceError | null, r: Res) => void,
    ) => void;
    fn(request, new Metadata(), { deadline: Date.now() + cellCallTimeoutMs }, (e, r) => (e ? reject(e) : resolve(r)));
  });
}

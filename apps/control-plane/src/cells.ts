/**
 * The cells this control plane manages, seen through each replica's admin
 * API (apps/cell-node): status followed by polling, and the namespace claims
 * and drops that make a cell own what the routing table says.
 */
import { credentials, Metadata, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
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

/** The seam the HTTP app uses; tests pass a fake. */
export interface CellDirectory {
  cellIds(): readonly string[];
  has(cell: string): boolean;
  /** Makes the cell own the namespace (idempotent). Throws ProblemError CELL_UNAVAILABLE when no leader answers. */
  claim(cell: string, namespace: string): Promise<void>;
  /** Drops the namespace on the cell (idempotent); 'not-empty' when it has live sessions and `force` is off. */
  drop(cell: string, namespace: string, force: boolean): Promise<DropResult>;
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
  ) {
    for (const plan of plans) {
      this.cells.set(
        plan.id,
        plan.replicas.map((r) => ({ plan: r, client: new adminpb.CellAdminClient(r.admin, credentials.createInsecure()), failing: false })),
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
    await this.onLeader(cell, (client) => unary(client, 'claimNamespace', { namespace }));
  }

  async drop(cell: string, namespace: string, force: boolean): Promise<DropResult> {
    try {
      const r = await this.onLeader(cell, (client) =>
        unary<adminpb.DropNamespaceRequest, adminpb.DropNamespaceResponse>(client, 'dropNamespace', { namespace, force }),
      );
      return r.dropped ? 'dropped' : 'not-owned';
    } catch (e) {
      if (isServiceError(e) && e.code === grpcStatus.FAILED_PRECONDITION && reasonOf(e) === 'NAMESPACE_NOT_EMPTY') return 'not-empty';
      throw e;
    }
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

function isServiceError(e: unknown): e is ServiceError {
  return typeof e === 'object' && e !== null && typeof (e as ServiceError).code === 'number';
}

function reasonOf(e: ServiceError): string | undefined {
  const v = (e.metadata as Metadata | undefined)?.get('lock-reason')[0];
  return typeof v === 'string' ? v : undefined;
}

function unary<Req, Res>(
  client: adminpb.CellAdminClient,
  method: 'status' | 'claimNamespace' | 'dropNamespace',
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

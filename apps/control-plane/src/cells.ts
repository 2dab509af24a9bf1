/**
 * The cells this control plane manages, seen through each replica's admin
 * API (apps/cell-node): status followed by polling, and the namespace claims
 * and drops that make a cell own what the routing table says.
 */
import { type ChannelCredentials, credentials, Metadata, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import { adminpb } from '@fencer/protocol';
import { ProblemError } from './problems.js';
import { cellCallTimeoutMs, cellLeaderSearchMsMax, moveCallTimeoutMs } from './limits.js';

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
  /** Entries behind the leader's log, as the leader last reported it (admin Status's member lag); absent on the leader itself or when unknown. */
  readonly lag?: number;
}

export interface CellView {
  readonly id: string;
  readonly leader: string | null;
  readonly term?: number;
  /** Live sessions, as the leader last reported them (placement picks the fewest). */
  readonly sessions: number;
  /** Leader changes the Status poll saw within the last hour (a new leader id or term). */
  readonly leaderChangesLastHour: number;
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
/**
 * What a tenant move asks of the cells (docs/decisions/0019-the-move-worker.md); each call is safe to repeat.
 * A move's calls carry its fence (the move id, its journal index, the meta term the worker's pass runs in): a
 * cell refuses one older than a step it applied for the namespace, CellRefusal reason MOVE_FENCED.
 */
export interface MoveCells {
  freeze(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<{ changed: boolean; namespaceRevision: number }>;
  unfreeze(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<{ changed: boolean }>;
  exportNamespace(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<NamespaceExport>;
  importNamespace(
    cell: string,
    namespace: string,
    exported: NamespaceExport,
    fence?: adminpb.MoveFence,
  ): Promise<{ sessions: number; locks: number; already: boolean }>;
  namespaceStatus(cell: string, namespace: string, exportSize: boolean): Promise<NamespaceView>;
  /** Every namespace record the cell's leader holds. */
  listNamespaces(cell: string): Promise<readonly adminpb.NamespaceEntry[]>;
  /** Drops the namespace on the cell (idempotent); 'not-empty' when it has live sessions and `force` is off. */
  drop(cell: string, namespace: string, force: boolean, fence?: adminpb.MoveFence): Promise<DropResult>;
}

/** The seam the HTTP app and the leader tasks use; tests pass a fake. */
export interface CellDirectory extends MoveCells {
  cellIds(): readonly string[];
  has(cell: string): boolean;
  /** Makes the cell own the namespace (idempotent). Throws ProblemError CELL_UNAVAILABLE when no leader answers. */
  claim(cell: string, namespace: string): Promise<void>;
  /** Replaces the namespace's quotas on the cell (idempotent; docs/decisions/0020-tenant-quotas-and-rate-limits.md). Throws when the cell did not take them. */
  setQuotas(cell: string, namespace: string, quotas: adminpb.NamespaceQuotas): Promise<void>;
  /** Replaces the namespace's token hashes on the cell (idempotent; docs/decisions/0016-tenant-credentials-and-mtls.md). Throws when the cell did not take them. */
  setCredentials(cell: string, namespace: string, credentials: adminpb.CredentialHash[]): Promise<void>;
  /** Every cell as last polled. */
  status(): readonly CellView[];
  /** Polls every replica now (skipped while a round runs), beside the regular interval; absent in fakes that are never polled. */
  poll?(): Promise<void>;
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

/**
 * A cell's followers are asked once every this many poll rounds while its
 * leader answers as leader; the leader every round. At eight cells of five,
 * asking all 40 replicas every second was a good part of the idle fleet's
 * CPU (README, footprint); placement needs only the leader's session count,
 * and a leader change is seen in the round it happens.
 */
export const FOLLOWER_POLL_EVERY_ROUNDS = 5;

/** Follows the cells' replicas over their admin gRPC API. */
export class GrpcCellDirectory implements CellDirectory {
  private readonly cells = new Map<string, Followed[]>();
  private readonly timer: NodeJS.Timeout;
  private polling = false;
  private round = 0;
  /** Per cell: the leader and term the last poll saw, and the monotonic ms of each change within the last hour. */
  private readonly leadership = new Map<string, { leaderTerm: string | undefined; changesMonoMs: number[] }>();

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

  /**
   * One Status round (skipped while the previous one runs): every replica on
   * every FOLLOWER_POLL_EVERY_ROUNDS-th round, else each cell's leader alone.
   */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    const everyReplica = this.round++ % FOLLOWER_POLL_EVERY_ROUNDS === 0;
    try {
      await Promise.all([...this.cells.values()].map((replicas) => this.pollCell(replicas, everyReplica)));
      this.noteLeaderChanges();
    } finally {
      this.polling = false;
    }
  }

  private async pollCell(replicas: readonly Followed[], everyReplica: boolean): Promise<void> {
    const leader = everyReplica ? undefined : replicas.find((f) => !f.failing && f.last?.role === 'leader');
    if (leader !== undefined) {
      await this.ask(leader);
      if (!leader.failing && leader.last?.role === 'leader') return;
    }
    // No leader known, or it stopped leading: ask the others now, so the new one is found in this round.
    await Promise.all(replicas.filter((f) => f !== leader).map((f) => this.ask(f)));
  }

  private async ask(f: Followed): Promise<void> {
    try {
      f.last = await unary<adminpb.StatusRequest, adminpb.StatusResponse>(f.client, 'status', {});
      f.lastOkMonoMs = this.monoMs();
      f.failing = false;
    } catch {
      f.failing = true;
    }
  }

  /**
   * Counts a change when a cell's leader (its id and term) differs from the previous poll's. A poll that sees
   * no leader counts nothing: the change is counted when the next leader shows, once, whoever it is.
   */
  private noteLeaderChanges(): void {
    const now = this.monoMs();
    for (const [id, replicas] of this.cells) {
      const leader = replicas.find((f) => !f.failing && f.last?.role === 'leader');
      const seen = this.leadership.get(id) ?? { leaderTerm: undefined, changesMonoMs: [] };
      this.leadership.set(id, seen);
      const changes = seen.changesMonoMs;
      while (changes.length > 0 && changes[0]! <= now - LEADER_CHANGES_WINDOW_MS) changes.shift();
      if (leader === undefined) continue;
      const leaderTerm = `${leader.plan.id}@${leader.last!.term}`;
      // The first leader seen after start is where counting begins, not a change.
      if (seen.leaderTerm !== undefined && seen.leaderTerm !== leaderTerm && changes.length < LEADER_CHANGES_KEPT_MAX) changes.push(now);
      seen.leaderTerm = leaderTerm;
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
        leaderChangesLastHour: this.leaderChangesLastHour(id, now),
        replicas: replicas.map((f): ReplicaView => {
          const st = f.last;
          const lag = leader?.last?.members.find((m) => m.id === f.plan.id && m.state !== 'self')?.lag;
          const learner = st?.members.some((m) => m.id === f.plan.id && !m.voter) ?? false;
          const role: ReplicaRole = f.failing || st === undefined ? 'unreachable' : learner ? 'learner' : (ROLE_OF[st.role] ?? 'follower');
          return {
            id: f.plan.id,
            grpc: f.plan.grpc,
            role,
            ...(st ? { term: st.term, commitIndex: st.commitIndex, appliedIndex: st.appliedIndex } : {}),
            ...(f.lastOkMonoMs !== undefined ? { lastSeenMs: Math.max(0, Math.round(now - f.lastOkMonoMs)) } : {}),
            ...(lag !== undefined && f !== leader ? { lag } : {}),
          };
        }),
      };
    });
  }

  private leaderChangesLastHour(cell: string, nowMonoMs: number): number {
    return (this.leadership.get(cell)?.changesMonoMs ?? []).filter((at) => at > nowMonoMs - LEADER_CHANGES_WINDOW_MS).length;
  }

  async claim(cell: string, namespace: string): Promise<void> {
    await asUnavailable(this.onLeader(cell, (client) => unary(client, 'claimNamespace', { namespace })));
  }

  async setQuotas(cell: string, namespace: string, quotas: adminpb.NamespaceQuotas): Promise<void> {
    await this.onLeader(cell, (client) =>
      unary<adminpb.SetNamespaceQuotasRequest, adminpb.SetNamespaceQuotasResponse>(client, 'setNamespaceQuotas', { namespace, quotas }),
    );
  }

  async setCredentials(cell: string, namespace: string, credentials: adminpb.CredentialHash[]): Promise<void> {
    await this.onLeader(cell, (client) =>
      unary<adminpb.SetNamespaceCredentialsRequest, adminpb.SetNamespaceCredentialsResponse>(client, 'setNamespaceCredentials', {
        namespace,
        credentials,
      }),
    );
  }

  async drop(cell: string, namespace: string, force: boolean, fence?: adminpb.MoveFence): Promise<DropResult> {
    try {
      const call = this.onLeader(cell, (client) =>
        unary<adminpb.DropNamespaceRequest, adminpb.DropNamespaceResponse>(client, 'dropNamespace', { namespace, force, fence }),
      );
      // A move's drop keeps the cell's own refusal (MOVE_FENCED ends the worker's pass); the HTTP API's says 503.
      const r = fence === undefined ? await asUnavailable(call) : await call;
      return r.dropped ? 'dropped' : 'not-owned';
    } catch (e) {
      if (isServiceError(e) && e.code === grpcStatus.FAILED_PRECONDITION && reasonOf(e) === 'NAMESPACE_NOT_EMPTY') return 'not-empty';
      throw e;
    }
  }

  async freeze(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<{ changed: boolean; namespaceRevision: number }> {
    return this.onLeader(cell, (c) =>
      unary<adminpb.FreezeNamespaceRequest, adminpb.FreezeNamespaceResponse>(c, 'freezeNamespace', { namespace, fence }, moveCallTimeoutMs),
    );
  }

  async unfreeze(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<{ changed: boolean }> {
    return this.onLeader(cell, (c) =>
      unary<adminpb.UnfreezeNamespaceRequest, adminpb.UnfreezeNamespaceResponse>(
        c,
        'unfreezeNamespace',
        { namespace, fence },
        moveCallTimeoutMs,
      ),
    );
  }

  /** Page by page from one leader; a leader change midway (another export) starts it over. */
  async exportNamespace(cell: string, namespace: string, fence?: adminpb.MoveFence): Promise<NamespaceExport> {
    return this.onLeader(cell, async (c) => {
      const page = (offset: number) =>
        unary<adminpb.ExportNamespaceRequest, adminpb.ExportNamespaceResponse>(
          c,
          'exportNamespace',
          { namespace, offset, fence },
          moveCallTimeoutMs,
        );
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
    fence?: adminpb.MoveFence,
  ): Promise<{ sessions: number; locks: number; already: boolean }> {
    return this.onLeader(cell, async (c) => {
      const total = exported.data.length;
      for (let offset = 0; ; offset += IMPORT_PIECE_BYTES) {
        const last = offset + IMPORT_PIECE_BYTES >= total;
        const r = await unary<adminpb.ImportNamespaceRequest, adminpb.ImportNamespaceResponse>(
          c,
          'importNamespace',
          {
            namespace,
            data: exported.data.subarray(offset, offset + IMPORT_PIECE_BYTES),
            offset,
            totalBytes: total,
            activate: false,
            waitsLeft: last ? [...exported.waitsLeft] : [],
            fence,
          },
          moveCallTimeoutMs,
        );
        if (r.done) return { sessions: r.sessions, locks: r.locks, already: r.already };
        if (last) throw new ProblemError('CELL_UNAVAILABLE', `the import of ${namespace} did not complete; import it again`);
      }
    });
  }

  async namespaceStatus(cell: string, namespace: string, exportSize: boolean): Promise<NamespaceView> {
    return this.onLeader(cell, (c) =>
      unary<adminpb.NamespaceStatusRequest, adminpb.NamespaceStatusResponse>(
        c,
        'namespaceStatus',
        { namespace, exportSize },
        exportSize ? moveCallTimeoutMs : cellCallTimeoutMs,
      ),
    );
  }

  async listNamespaces(cell: string): Promise<readonly adminpb.NamespaceEntry[]> {
    const r = await this.onLeader(cell, (c) =>
      unary<adminpb.ListNamespacesRequest, adminpb.ListNamespacesResponse>(c, 'listNamespaces', {}),
    );
    return r.namespaces;
  }

  /**
   * Runs `call` on the cell's leader: the last known one first, then every
   * replica, twice at most, and none started after cellLeaderSearchMsMax.
   */
  private async onLeader<T>(cell: string, call: (client: adminpb.CellAdminClient) => Promise<T>): Promise<T> {
    const replicas = this.cells.get(cell);
    if (replicas === undefined) throw new ProblemError('CELL_NOT_FOUND', `no cell "${cell}" in this control plane's cell list`);
    const ordered = [...replicas].sort((a, b) => Number(b.last?.role === 'leader') - Number(a.last?.role === 'leader'));
    const startedMs = this.monoMs();
    let lastError = '';
    for (let round = 0; round < 2; round++) {
      for (const f of ordered) {
        if (lastError !== '' && this.monoMs() - startedMs >= cellLeaderSearchMsMax) break;
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

/** The window leader changes are counted over (the dashboard's "last hour"). */
const LEADER_CHANGES_WINDOW_MS = 60 * 60 * 1000;
/** Changes remembered per cell: one a second for the whole window at most. */
const LEADER_CHANGES_KEPT_MAX = 3_600;

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
    | 'listNamespaces'
    | 'setNamespaceQuotas'
    | 'setNamespaceCredentials',
  request: Req,
  timeoutMs = cellCallTimeoutMs,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const fn = client[method].bind(client) as unknown as (
      r: Req,
      m: Metadata,
      o: { deadline: number },
      cb: (e: ServiceError | null, r: Res) => void,
    ) => void;
    fn(request, new Metadata(), { deadline: Date.now() + timeoutMs }, (e, r) => (e ? reject(e) : resolve(r)));
  });
}

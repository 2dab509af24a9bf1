/**
 * Client heartbeats, grouped by cell and sent as one HeartbeatBatch per cell
 * leader per interval. The session proxy is built on it, and the router uses
 * it for the KeepAlive streams it is sent.
 *
 * Safety: a client's heartbeat is answered only from the answer of the
 * leader to the batch that carried it (after the leader's confirmation
 * round), so a proxy never claims a lease the leader did not extend. The
 * batcher holds no truth: losing it only delays heartbeats until the client
 * reconnects elsewhere.
 *
 * Per cell, at most one batch is in flight. Heartbeats arriving meanwhile
 * wait for the next tick. A NOT_LEADER answer with a leader-hint re-sends
 * the same batch to the new leader at once; any other failure keeps the
 * batch pending for the next tick, sent to the next replica. The interval is
 * the configured one, but never more than a quarter of the shortest TTL
 * answered lately, so every session hears from the leader several times per
 * TTL.
 */
import { FencerError, namespaceOfSessionId } from '@fencer/base';
import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { fromServiceError, type internalpb } from '@fencer/protocol';
import type { Logger } from 'pino';
import type { CellPool, CellState } from './cell-pool.js';
import { BATCH_SESSIONS_MAX, BATCH_TIMEOUT_MS, BATCHER_SESSIONS_MAX, HEARTBEAT_INTERVAL_MS_MIN } from './limits.js';
import type { RouterMetrics } from './metrics.js';
import type { RoutingSource } from './routing-source.js';

export interface HeartbeatAnswer {
  readonly sessionId: string;
  readonly ttlMsRemaining: number;
  readonly expired: boolean;
}

export type HeartbeatDone = (answer: HeartbeatAnswer | FencerError) => void;

interface Waiter {
  readonly done: HeartbeatDone;
  readonly arrivedAtMs: number;
}

interface CellQueue {
  /** Heartbeats not yet sent, by session (one entry per session, every waiter answered by it). */
  pending: Map<string, Waiter[]>;
  /** The batch at the leader now, if any. */
  inFlight: Map<string, Waiter[]> | undefined;
  /** Re-sends to hinted leaders since the last tick: bounded so two replicas pointing at each other cannot loop. */
  hops: number;
}

export interface HeartbeatBatcherDeps {
  readonly pool: CellPool;
  readonly source: RoutingSource;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  /** Names this process in the batches (for the cells' operators). */
  readonly proxyId: string;
  readonly intervalMs: number;
}

/** Unroutable heartbeats refresh the routing table at most this often. */
const REFRESH_SPACING_MS = 100;

const expired = (sessionId: string): HeartbeatAnswer => ({ sessionId, ttlMsRemaining: 0, expired: true });

export class HeartbeatBatcher {
  private readonly queues = new Map<string, CellQueue>();
  private timer: NodeJS.Timeout | undefined;
  private sessions = 0;
  /** Shortest TTL answered in the current window, and in the previous one. */
  private ttlMinWindowMs = Infinity;
  private ttlMinPreviousMs = Infinity;
  private windowEndsAtMs = 0;
  private closed = false;
  private refreshing: Promise<unknown> | undefined;
  private lastRefreshAtMs = -Infinity;

  constructor(private readonly deps: HeartbeatBatcherDeps) {}

  /** The interval in force: the configured one, capped at a quarter of the shortest TTL seen lately. */
  get intervalMs(): number {
    const ttl = Math.min(this.ttlMinWindowMs, this.ttlMinPreviousMs);
    return Math.max(HEARTBEAT_INTERVAL_MS_MIN, Math.min(this.deps.intervalMs, Math.floor(ttl / 4)));
  }

  /** Sessions with a heartbeat pending or at a leader. */
  get pendingSessions(): number {
    return this.sessions;
  }

  start(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.tick();
      this.schedule();
    }, this.intervalMs);
    this.timer.unref?.();
  }

  /**
   * Queues one heartbeat. `done` is called once: with the leader's answer for
   * the session, with `expired` for an id no cell could have issued (or whose
   * namespace no cell holds), or with TOO_MANY_REQUESTS when the batcher is full.
   */
  heartbeat(sessionId: string, done: HeartbeatDone): void {
    const ns = namespaceOfSessionId(sessionId);
    if (ns === undefined) {
      this.deps.metrics.heartbeats.inc({ cell: '', outcome: 'unroutable' });
      return done(expired(sessionId));
    }
    if (!this.routable(ns)) {
      // A namespace created a moment ago may not be in this table yet: ask the source once before calling the session expired.
      this.refreshSoon().then(
        () => {
          if (this.closed) return;
          if (this.routable(ns)) return this.heartbeat(sessionId, done);
          this.deps.metrics.heartbeats.inc({ cell: '', outcome: 'unroutable' });
          done(expired(sessionId));
        },
        () => done(expired(sessionId)),
      );
      return;
    }
    const route = this.deps.source.table().routes.get(ns)!;
    const q = this.queue(route.cell);
    const waiters = q.pending.get(sessionId);
    const waiter = { done, arrivedAtMs: performance.now() };
    if (waiters) {
      waiters.push(waiter);
      return;
    }
    if (this.sessions >= BATCHER_SESSIONS_MAX) {
      return done(
        new FencerError('TOO_MANY_REQUESTS', `this proxy carries ${BATCHER_SESSIONS_MAX} sessions already; connect to another proxy`),
      );
    }
    this.sessions++;
    this.deps.metrics.pendingHeartbeats.set(this.sessions);
    q.pending.set(sessionId, [waiter]);
  }

  private routable(ns: string): boolean {
    const route = this.deps.source.table().routes.get(ns);
    return route !== undefined && this.deps.pool.cell(route.cell) !== undefined;
  }

  /** One refresh of the routing source shared by every unroutable heartbeat, at most one per REFRESH_SPACING_MS. */
  private refreshSoon(): Promise<unknown> {
    if (this.refreshing) return this.refreshing;
    const waitMs = Math.max(0, this.lastRefreshAtMs + REFRESH_SPACING_MS - performance.now());
    this.refreshing = new Promise((resolve) => setTimeout(resolve, waitMs))
      .then(() => this.deps.source.refresh())
      .finally(() => {
        this.lastRefreshAtMs = performance.now();
        this.refreshing = undefined;
      });
    return this.refreshing;
  }

  private queue(cellId: string): CellQueue {
    let q = this.queues.get(cellId);
    if (!q) {
      q = { pending: new Map(), inFlight: undefined, hops: 0 };
      this.queues.set(cellId, q);
    }
    return q;
  }

  /** Sends one batch to each cell with heartbeats pending and none in flight. Public for tests that drive time. */
  tick(): void {
    const now = performance.now();
    if (now >= this.windowEndsAtMs) {
      this.ttlMinPreviousMs = this.ttlMinWindowMs;
      this.ttlMinWindowMs = Infinity;
      this.windowEndsAtMs = now + 10_000;
    }
    for (const [cellId, q] of this.queues) {
      q.hops = 0;
      if (q.inFlight === undefined && q.pending.size > 0) this.send(cellId, q, undefined);
    }
  }

  private send(cellId: string, q: CellQueue, resend: Map<string, Waiter[]> | undefined): void {
    const cell = this.deps.pool.cell(cellId);
    let batch = resend;
    if (!batch) {
      batch = new Map();
      for (const [id, w] of q.pending) {
        if (batch.size >= BATCH_SESSIONS_MAX) break;
        batch.set(id, w);
        q.pending.delete(id);
      }
    }
    q.inFlight = batch;
    if (!cell) return this.answerAll(q, batch, cellId, (id) => expired(id));
    const target = cell.target();
    const sessionIds = [...batch.keys()];
    this.deps.metrics.batchSessions.observe({ cell: cellId }, sessionIds.length);
    this.deps.pool
      .internalStub(target)
      .heartbeatBatch(
        { sessionIds, proxyId: this.deps.proxyId },
        new Metadata(),
        { deadline: Date.now() + BATCH_TIMEOUT_MS },
        (err: ServiceError | null, res?: internalpb.HeartbeatBatchResponse) => {
          if (this.closed) return;
          if (err || !res) return this.batchFailed(cellId, cell, q, batch, target, err);
          this.deps.metrics.batches.inc({ cell: cellId, outcome: 'ok' });
          const byId = new Map(res.sessions.map((s) => [s.sessionId, s]));
          this.answerAll(q, batch, cellId, (id) => {
            const s = byId.get(id);
            if (!s) return undefined; // the leader did not answer this one: it goes out again next tick
            if (!s.expired) this.ttlMinWindowMs = Math.min(this.ttlMinWindowMs, s.ttlMsRemaining);
            return { sessionId: id, ttlMsRemaining: s.ttlMsRemaining, expired: s.expired };
          });
        },
      );
  }

  private batchFailed(
    cellId: string,
    cell: CellState,
    q: CellQueue,
    batch: Map<string, Waiter[]>,
    target: string,
    err: ServiceError | null,
  ): void {
    const fe = err ? fromServiceError(err) : new FencerError('NO_LEADER', 'empty answer');
    this.deps.metrics.batches.inc({ cell: cellId, outcome: fe.code });
    if (
      fe.code === 'NOT_LEADER' &&
      fe.leaderHint !== undefined &&
      fe.leaderHint !== target &&
      cell.replicas.includes(fe.leaderHint) &&
      q.hops < cell.replicas.length
    ) {
      // A leader change: the pending batch goes to the new leader now.
      q.hops++;
      cell.noteLeader(fe.leaderHint);
      return this.send(cellId, q, batch);
    }
    if (fe.code === 'NOT_LEADER') cell.noteLeader(fe.leaderHint);
    else cell.advance(target);
    this.deps.logger.debug({ cell: cellId, target, code: fe.code, err: fe.message }, 'heartbeat batch failed; pending for the next tick');
    // Back in front of the pending heartbeats, merging waiters of sessions that heartbeated again meanwhile.
    const merged = new Map(batch);
    for (const [id, w] of q.pending) {
      const before = merged.get(id);
      if (before) {
        before.push(...w);
        this.sessions--;
      } else merged.set(id, w);
    }
    q.pending = merged;
    q.inFlight = undefined;
  }

  /** Answers every waiter of the batch (an `undefined` answer puts the session back in pending). */
  private answerAll(q: CellQueue, batch: Map<string, Waiter[]>, cellId: string, answer: (id: string) => HeartbeatAnswer | undefined): void {
    q.inFlight = undefined;
    const now = performance.now();
    const table = this.deps.source.table();
    for (const [id, waiters] of batch) {
      const a = answer(id);
      // An "expired" from a cell that no longer holds the namespace says nothing about the session: ask its new cell.
      if (a?.expired) {
        const ns = namespaceOfSessionId(id);
        const routedTo = ns === undefined ? undefined : table.routes.get(ns)?.cell;
        if (routedTo !== undefined && routedTo !== cellId) {
          this.sessions--;
          for (const w of waiters) this.heartbeat(id, w.done);
          continue;
        }
      }
      if (a === undefined) {
        const again = q.pending.get(id);
        if (again) {
          again.push(...waiters);
          this.sessions--;
        } else q.pending.set(id, waiters);
        continue;
      }
      this.sessions--;
      this.deps.metrics.heartbeats.inc({ cell: cellId, outcome: a.expired ? 'expired' : 'alive' }, waiters.length);
      for (const w of waiters) {
        this.deps.metrics.heartbeatAckSeconds.observe((now - w.arrivedAtMs) / 1000);
        w.done(a);
      }
    }
    this.deps.metrics.pendingHeartbeats.set(this.sessions);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const gone = new FencerError('SHUTTING_DOWN', 'the proxy is shutting down; reconnect to another');
    for (const q of this.queues.values()) {
      for (const ws of [...q.pending.values(), ...(q.inFlight?.values() ?? [])]) for (const w of ws) w.done(gone);
    }
    this.queues.clear();
  }
}

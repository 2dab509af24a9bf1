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
 * batch pending for the next tick, sent to the next replica, except a lost
 * connection (UNAVAILABLE from grpc-js itself, no reason of ours): then the
 * cell's replicas are asked who leads (leader-search.ts) and the pending
 * heartbeats go there as soon as one answers. The interval is
 * the configured one, but never more than a quarter of the shortest TTL
 * answered lately, so every session hears from the leader several times per
 * TTL.
 */
import { FencerError } from '@fencer/base';
import { SESSION_ID_SEPARATOR, namespaceOfSessionId } from '@fencer/contract';
import type { RoutingTable } from '@fencer/contract';
import { Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { LOCK_REASON_KEY, fromServiceError, type internalpb } from '@fencer/protocol';
import type { Logger } from 'pino';
import type { CellPool, CellState } from './cell-pool.js';
import { BATCH_SESSIONS_MAX, BATCH_TIMEOUT_MS, BATCHER_SESSIONS_MAX, HEARTBEAT_INTERVAL_MS_MIN } from './limits.js';
import type { RouterMetrics } from './metrics.js';
import type { RoutingSource } from './routing-source.js';
import { searchLeader } from './leader-search.js';
import { type Attempt, upstreamAttempt } from './upstream.js';
import { forbidden } from './auth.js';

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

/**
 * One session's heartbeats waiting for the same answer: the first inline (a
 * session heartbeats about once per interval, so most entries have one
 * waiter), any later ones in `more`.
 */
interface Entry {
  readonly done: HeartbeatDone;
  readonly arrivedAtMs: number;
  more: Waiter[] | undefined;
  readonly sessionId: string;
  /** The token of the stream(s) this heartbeat came from: the leader checks the session's namespace against it. */
  readonly token: string | undefined;
}

/**
 * Where a heartbeat waits: by session, and by token too, so heartbeats of one
 * session from streams with different tokens are never answered together (a
 * stream without a right to the session must not share, or spoil, the
 * answer of one with it).
 */
function keyOf(sessionId: string, token: string | undefined): string {
  return token === undefined ? sessionId : `${sessionId}\n${token}`;
}

interface CellQueue {
  /** Heartbeats not yet sent, by session (one entry per session, every waiter answered by it). */
  pending: Map<string, Entry>;
  /** The batch at the leader now, if any; in the order of its request's session_ids. */
  inFlight: Map<string, Entry> | undefined;
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
  /** A fleet with tenant tokens: a session of a namespace with no tenant is forbidden, not expired. */
  readonly auth?: boolean;
}

/** Unroutable heartbeats refresh the routing table at most this often. */
const REFRESH_SPACING_MS = 100;
/** The shortest TTL is remembered over two windows of this length: a TTL not seen for that long stops capping the interval. */
const TTL_WINDOW_MS = 10_000;

const expired = (sessionId: string): HeartbeatAnswer => ({ sessionId, ttlMsRemaining: 0, expired: true });

/** A batch that failed in grpc-js itself (no reason of ours) with UNAVAILABLE: the connection to the node was lost. */
function connectionLost(err: ServiceError | null): boolean {
  return err !== null && err.code === status.UNAVAILABLE && (err.metadata?.get(LOCK_REASON_KEY).length ?? 0) === 0;
}

/** A batch as its request: each session once, each distinct token once, and which token each session came with (1-based, 0 = none). */
function batchRequest(batch: Map<string, Entry>): { sessionIds: string[]; tokens: string[]; tokenIndex: number[] } {
  const sessionIds: string[] = [];
  const tokens: string[] = [];
  const tokenIndex: number[] = [];
  let indexOf: Map<string, number> | undefined;
  for (const e of batch.values()) {
    sessionIds.push(e.sessionId);
    if (e.token === undefined) {
      tokenIndex.push(0);
      continue;
    }
    indexOf ??= new Map();
    let at = indexOf.get(e.token);
    if (at === undefined) {
      at = tokens.push(e.token);
      indexOf.set(e.token, at);
    }
    tokenIndex.push(at);
  }
  // No token at all (a fleet without auth): the request stays as it was, without the token fields' bytes.
  return indexOf === undefined ? { sessionIds, tokens, tokenIndex: [] } : { sessionIds, tokens, tokenIndex };
}

/** Adds the waiters of `from` to `into` (the same session met twice: after a failed batch, or a partial answer). */
function merge(into: Entry, from: Entry): void {
  const more = (into.more ??= []);
  more.push({ done: from.done, arrivedAtMs: from.arrivedAtMs });
  if (from.more) more.push(...from.more);
}

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
  /**
   * Namespace -> cell id for the routing table in `routesOf`, filled by the
   * heartbeats that named a routable namespace, emptied when the table
   * changes. Bounded by the table's routes (ROUTES_MAX): only namespaces it
   * routes enter.
   */
  private readonly cellOfNamespace = new Map<string, string>();
  private routesOf: RoutingTable | undefined;

  /** Unary calls for the leader search after a lost connection. */
  private readonly attempt: Attempt;

  constructor(private readonly deps: HeartbeatBatcherDeps) {
    this.attempt = upstreamAttempt(deps.pool, deps.metrics, deps.proxyId);
  }

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
  heartbeat(sessionId: string, done: HeartbeatDone, token?: string): void {
    const cellId = this.cachedCellOf(sessionId) ?? this.routeSlowly(sessionId, done, token);
    if (cellId === undefined) return;
    const q = this.queue(cellId);
    const key = keyOf(sessionId, token);
    const entry = q.pending.get(key);
    if (entry) {
      (entry.more ??= []).push({ done, arrivedAtMs: performance.now() });
      return;
    }
    if (this.sessions >= BATCHER_SESSIONS_MAX) {
      return done(
        new FencerError('TOO_MANY_REQUESTS', `this proxy carries ${BATCHER_SESSIONS_MAX} sessions already; connect to another proxy`),
      );
    }
    this.sessions++;
    q.pending.set(key, { done, arrivedAtMs: performance.now(), more: undefined, sessionId, token });
  }

  /** The cell of a session id whose namespace a heartbeat routed already under the table in force; else undefined. */
  private cachedCellOf(sessionId: string): string | undefined {
    const table = this.deps.source.table();
    if (table !== this.routesOf) {
      this.cellOfNamespace.clear();
      this.routesOf = table;
    }
    const at = sessionId.indexOf(SESSION_ID_SEPARATOR);
    return at > 0 ? this.cellOfNamespace.get(sessionId.slice(0, at)) : undefined;
  }

  /**
   * The cell of a session id not in the cache: validated, routed and cached;
   * or undefined once `done` was answered (or will be, after a refresh of the
   * routing source).
   */
  private routeSlowly(sessionId: string, done: HeartbeatDone, token: string | undefined): string | undefined {
    const ns = namespaceOfSessionId(sessionId);
    // With tenant tokens, a session of a namespace nobody holds is forbidden, as another tenant's is (docs/decisions/0016-tenant-credentials-and-mtls.md).
    const unroutable = (): HeartbeatAnswer | FencerError => (this.deps.auth === true ? forbidden(ns ?? '') : expired(sessionId));
    if (ns === undefined) {
      this.deps.metrics.heartbeats.inc({ cell: '', outcome: 'unroutable' });
      done(unroutable());
      return undefined;
    }
    const cellId = this.routable(ns);
    if (cellId !== undefined) {
      if (this.deps.source.table() === this.routesOf) this.cellOfNamespace.set(ns, cellId);
      return cellId;
    }
    // A namespace created a moment ago may not be in this table yet: ask the source once before calling the session expired.
    this.refreshSoon().then(
      () => {
        if (this.closed) return;
        if (this.routable(ns) !== undefined) return this.heartbeat(sessionId, done, token);
        this.deps.metrics.heartbeats.inc({ cell: '', outcome: 'unroutable' });
        done(unroutable());
      },
      () => done(unroutable()),
    );
    return undefined;
  }

  /** The cell holding a namespace, if the table routes it to a cell the pool knows. */
  private routable(ns: string): string | undefined {
    const route = this.deps.source.table().routes.get(ns);
    return route !== undefined && this.deps.pool.cell(route.cell) !== undefined ? route.cell : undefined;
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
      this.windowEndsAtMs = now + TTL_WINDOW_MS;
    }
    for (const [cellId, q] of this.queues) {
      q.hops = 0;
      if (q.inFlight === undefined && q.pending.size > 0) this.send(cellId, q, undefined);
    }
    this.deps.metrics.pendingHeartbeats.set(this.sessions);
  }

  /** The next batch: every pending heartbeat when they fit one (the common case: the map changes hands), else the oldest BATCH_SESSIONS_MAX. */
  private takeBatch(q: CellQueue): Map<string, Entry> {
    if (q.pending.size <= BATCH_SESSIONS_MAX) {
      const batch = q.pending;
      q.pending = new Map();
      return batch;
    }
    const batch = new Map<string, Entry>();
    for (const [id, e] of q.pending) {
      if (batch.size >= BATCH_SESSIONS_MAX) break;
      batch.set(id, e);
      q.pending.delete(id);
    }
    return batch;
  }

  private send(cellId: string, q: CellQueue, resend: Map<string, Entry> | undefined): void {
    const cell = this.deps.pool.cell(cellId);
    const batch = resend ?? this.takeBatch(q);
    q.inFlight = batch;
    if (!cell) return this.answerBatch(q, batch, cellId, undefined);
    const target = cell.target();
    const { sessionIds, tokens, tokenIndex } = batchRequest(batch);
    this.deps.metrics.batchSessions.observe({ cell: cellId }, sessionIds.length);
    this.deps.pool
      .internalStub(target)
      .heartbeatBatch(
        { sessionIds, proxyId: this.deps.proxyId, tokens, tokenIndex },
        new Metadata(),
        { deadline: Date.now() + BATCH_TIMEOUT_MS },
        (err: ServiceError | null, res?: internalpb.HeartbeatBatchResponse) => {
          if (this.closed) return;
          if (err || !res) return this.batchFailed(cellId, cell, q, batch, target, err);
          this.deps.metrics.batches.inc({ cell: cellId, outcome: 'ok' });
          this.answerBatch(q, batch, cellId, res.sessions);
        },
      );
  }

  private batchFailed(
    cellId: string,
    cell: CellState,
    q: CellQueue,
    batch: Map<string, Entry>,
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
    else if (connectionLost(err)) this.followAfterLoss(cellId, cell, target, batch);
    else cell.advance(target);
    this.deps.logger.debug({ cell: cellId, target, code: fe.code, err: fe.message }, 'heartbeat batch failed; pending for the next tick');
    // Back in front of the pending heartbeats, merging waiters of sessions that heartbeated again meanwhile.
    for (const [id, e] of q.pending) {
      const before = batch.get(id);
      if (before) {
        merge(before, e);
        this.sessions--;
      } else batch.set(id, e);
    }
    q.pending = batch;
    q.inFlight = undefined;
  }

  /**
   * The connection to the cell's leader was lost: find the new leader by
   * asking the replicas, and send what is pending there as soon as one
   * answers, rather than at the next tick to the next replica in turn.
   */
  private followAfterLoss(cellId: string, cell: CellState, target: string, batch: Map<string, Entry>): void {
    const first = batch.values().next();
    const namespace = first.done === true ? undefined : namespaceOfSessionId(first.value.sessionId);
    if (namespace === undefined) return cell.advance(target);
    void searchLeader(this.attempt, cell, target, namespace, Date.now() + BATCH_TIMEOUT_MS).then((found) => {
      const q = this.queues.get(cellId);
      if (found === undefined || this.closed || q === undefined || q.inFlight !== undefined || q.pending.size === 0) return;
      this.send(cellId, q, undefined);
    });
  }

  /**
   * Answers every waiter of the batch from the leader's answers (`undefined`:
   * the cell is gone, every session is expired). The leader answers in the
   * order of the request; an answer out of that order is looked up by id,
   * and a session it does not answer goes out again with the next batch.
   */
  private answerBatch(
    q: CellQueue,
    batch: Map<string, Entry>,
    cellId: string,
    answers: readonly internalpb.SessionHeartbeat[] | undefined,
  ): void {
    q.inFlight = undefined;
    const now = performance.now();
    const table = this.deps.source.table();
    const ackSeconds = this.deps.metrics.heartbeatAckSeconds;
    let byId: Map<string, internalpb.SessionHeartbeat> | undefined;
    let ttlMinMs = this.ttlMinWindowMs;
    let alive = 0;
    let gone = 0;
    let i = 0;
    for (const [key, entry] of batch) {
      const id = entry.sessionId;
      let a: internalpb.SessionHeartbeat | HeartbeatAnswer | undefined;
      if (answers === undefined) a = expired(id);
      else {
        a = answers[i];
        if (a === undefined || a.sessionId !== id) a = (byId ??= new Map(answers.map((s) => [s.sessionId, s]))).get(id);
      }
      i++;
      if (a === undefined) {
        // The leader did not answer this one: it goes out again next tick.
        const again = q.pending.get(key);
        if (again) {
          merge(again, entry);
          this.sessions--;
        } else q.pending.set(key, entry);
        continue;
      }
      if ('forbidden' in a && a.forbidden) {
        // The stream's token does not grant the session's namespace: not extended, and the stream is refused.
        this.sessions--;
        const refused = forbidden(namespaceOfSessionId(id) ?? '');
        entry.done(refused);
        if (entry.more) for (const w of entry.more) w.done(refused);
        continue;
      }
      if (a.expired) {
        // An "expired" from a cell that no longer holds the namespace says nothing about the session: ask its new cell.
        const ns = namespaceOfSessionId(id);
        const routedTo = ns === undefined ? undefined : table.routes.get(ns)?.cell;
        if (routedTo !== undefined && routedTo !== cellId) {
          this.sessions--;
          this.heartbeat(id, entry.done, entry.token);
          if (entry.more) for (const w of entry.more) this.heartbeat(id, w.done, entry.token);
          continue;
        }
        gone += 1 + (entry.more?.length ?? 0);
      } else {
        if (a.ttlMsRemaining < ttlMinMs) ttlMinMs = a.ttlMsRemaining;
        alive += 1 + (entry.more?.length ?? 0);
      }
      this.sessions--;
      ackSeconds.observe((now - entry.arrivedAtMs) / 1000);
      entry.done(a);
      if (entry.more) {
        for (const w of entry.more) {
          ackSeconds.observe((now - w.arrivedAtMs) / 1000);
          w.done(a);
        }
      }
    }
    this.ttlMinWindowMs = ttlMinMs;
    if (alive > 0) this.deps.metrics.heartbeats.inc({ cell: cellId, outcome: 'alive' }, alive);
    if (gone > 0) this.deps.metrics.heartbeats.inc({ cell: cellId, outcome: 'expired' }, gone);
    this.deps.metrics.pendingHeartbeats.set(this.sessions);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const gone = new FencerError('SHUTTING_DOWN', 'the proxy is shutting down; reconnect to another');
    for (const q of this.queues.values()) {
      for (const e of [...q.pending.values(), ...(q.inFlight?.values() ?? [])]) {
        e.done(gone);
        if (e.more) for (const w of e.more) w.done(gone);
      }
    }
    this.queues.clear();
  }
}

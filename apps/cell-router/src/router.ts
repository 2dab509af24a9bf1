/**
 * The cell router: the whole client contract in front of many cells.
 *
 * Every call is routed by the namespace of its lock name, prefix or session
 * id (a session id embeds its namespace), through the routing table, to its
 * cell's last known leader. UNAVAILABLE (NOT_LEADER, NO_LEADER,
 * NAMESPACE_MOVING, or no answer at all) is retried with backoff inside the
 * caller's deadline, following `leader-hint`; that is safe because Acquire
 * carries a request_id the cell deduplicates. FAILED_PRECONDITION
 * NAMESPACE_NOT_HERE refreshes the table and retries. Errors reach the
 * client in the contract's words, without the cell-internal leader-hint (the
 * client's endpoint is the router). Watch is proxied with cancellation both
 * ways and resumed, after its replica goes away, from the last revision
 * passed on, so the client sees no gap and no repeat. KeepAlive goes
 * through a HeartbeatBatcher, as on a session proxy.
 *
 * A namespace the table does not route is NOT_FOUND NAMESPACE_NOT_FOUND,
 * unless auto-tenants is on: then the first call naming it (OpenSession,
 * GetLock, ListLocks, Watch, CheckToken) creates its tenant through the
 * routing source. Calls by session id never create a tenant: a session of a
 * namespace nobody holds does not exist (SESSION_NOT_FOUND).
 */
import { FencerError, isValidNamespace, namespaceOfSessionId, type ErrorCode } from '@fencer/base';
import {
  Metadata,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceError,
  type ClientReadableStream,
  status,
} from '@grpc/grpc-js';
import { parseLockName, parseLockPrefix } from '@fencer/lock-fsm';
import { FORWARDED_KEY, fromServiceError, lockservice, toServiceError } from '@fencer/protocol';
import type { Logger } from 'pino';
import { CellPool, type CellState } from './cell-pool.js';
import { HeartbeatBatcher } from './heartbeat-batcher.js';
import { KeepAliveStreams } from './keepalive-stream.js';
import { startLockServer, type LockServer } from './lock-server.js';
import {
  CALL_BUDGET_MS_DEFAULT,
  CELL_CALLS_IN_FLIGHT_MAX,
  HEARTBEAT_INTERVAL_MS_DEFAULT,
  RETRY_BACKOFF_MS_MAX,
  RETRY_BACKOFF_MS_MIN,
  WATCHES_MAX,
} from './limits.js';
import { RouterMetrics } from './metrics.js';
import type { RoutingTable } from './routing.js';
import type { RoutingSource } from './routing-source.js';

export interface RouterDeps {
  readonly source: RoutingSource;
  readonly logger: Logger;
  readonly metrics?: RouterMetrics;
  /** Create the tenant of an unknown namespace on first use (the local fleet's default), instead of NOT_FOUND NAMESPACE_NOT_FOUND. */
  readonly autoTenants?: boolean;
  readonly cellCallsInFlightMax?: number;
  readonly heartbeatIntervalMs?: number;
  /** Names this router in the HeartbeatBatches it sends. */
  readonly id?: string;
}

export interface Router {
  readonly metrics: RouterMetrics;
  readonly pool: CellPool;
  readonly source: RoutingSource;
  readonly batcher: HeartbeatBatcher;
  /** The grpc-js handlers of LockService (also usable on a server you own). */
  readonly handlers: lockservice.LockServiceServer;
  /** Starts the routing source and the heartbeat timer, then listens on host:port (port 0 picks one); resolves with the address. */
  listen(address: string): Promise<string>;
  close(): Promise<void>;
}

type Method = 'openSession' | 'acquire' | 'release' | 'checkToken' | 'getLock' | 'listLocks' | 'closeSession';

/** Reasons that mean "this attempt did not run the call, or ran it idempotently": retry elsewhere. */
const RETRY_CODES = new Set<ErrorCode>(['NOT_LEADER', 'NO_LEADER', 'NAMESPACE_MOVING', 'OUTCOME_UNKNOWN', 'SHUTTING_DOWN']);

/** The cell node's metadata key for a call a replica forwarded already (it is never forwarded twice). */

const fail = (code: ErrorCode, message: string): never => {
  throw new FencerError(code, message);
};

/** The namespace a call names, or the contract's error for a name, prefix or id that names none. */
export function namespaceOfCall(method: Method | 'watch', req: Record<string, unknown>): { namespace: string; bySession: boolean } {
  const str = (k: string): string => (typeof req[k] === 'string' ? (req[k] as string) : '');
  switch (method) {
    case 'openSession': {
      const ns = str('namespace');
      if (!isValidNamespace(ns))
        fail('INVALID_NAME', `namespace "${ns.slice(0, 80)}" must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."`);
      return { namespace: ns, bySession: false };
    }
    case 'acquire':
    case 'release':
    case 'closeSession': {
      const id = str('sessionId');
      if (id === '') fail('SESSION_NOT_FOUND', 'session_id is empty: open a session first');
      const ns = namespaceOfSessionId(id);
      if (ns === undefined) fail('SESSION_NOT_FOUND', `session "${id.slice(0, 80)}" does not exist (malformed id)`);
      return { namespace: ns as string, bySession: true };
    }
    case 'checkToken':
    case 'getLock': {
      const p = parseLockName(str('name'));
      if (!p.ok) fail(p.code, p.message);
      return { namespace: (p as { namespace: string }).namespace, bySession: false };
    }
    case 'listLocks': {
      const p = parseLockPrefix(str('prefix'));
      if (!p.ok) fail(p.code, p.message);
      return { namespace: (p as { namespace: string }).namespace, bySession: false };
    }
    case 'watch': {
      const p = req.prefix === true ? parseLockPrefix(str('name')) : parseLockName(str('name'));
      if (!p.ok) fail(p.code, p.message);
      return { namespace: (p as { namespace: string }).namespace, bySession: false };
    }
  }
}

/** The caller's deadline as epoch ms; a call without one gets a default budget (plus its wait, for Acquire). */
function deadlineOf(call: { getDeadline(): Date | number }, extraMs: number): number {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : d;
  return Number.isFinite(ms) && ms > 0 ? ms : Date.now() + CALL_BUDGET_MS_DEFAULT + extraMs;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const backoffMs = (attempt: number): number =>
  Math.min(RETRY_BACKOFF_MS_MAX, RETRY_BACKOFF_MS_MIN * 2 ** attempt) * (0.5 + Math.random() / 2);

/** A FencerError as the router's client sees it: no leader-hint (the cell's replicas are not the client's endpoints). */
function toClientError(e: unknown, logger: Logger, method: string): Partial<ServiceError> {
  if (e instanceof FencerError) return toServiceError(new FencerError(e.code, e.message));
  logger.error({ method, err: (e as Error)?.stack ?? String(e) }, 'unexpected error in a router handler');
  return toServiceError(new FencerError('INTERNAL', `internal error in the router: ${(e as Error)?.message ?? e}`));
}

export function buildRouter(deps: RouterDeps): Router {
  const { source, logger } = deps;
  const metrics = deps.metrics ?? new RouterMetrics();
  const pool = new CellPool();
  metrics.inFlightSource = () => pool.all();
  const inFlightMax = deps.cellCallsInFlightMax ?? CELL_CALLS_IN_FLIGHT_MAX;
  const routerId = deps.id ?? `router-${process.pid}`;
  const batcher = new HeartbeatBatcher({
    pool,
    source,
    logger,
    metrics,
    proxyId: routerId,
    intervalMs: deps.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS_DEFAULT,
  });
  const keepAlives = new KeepAliveStreams(batcher, metrics);
  const creating = new Map<string, Promise<RoutingTable>>();
  let watches = 0;
  let server: LockServer | undefined;

  const follow = (t: RoutingTable): void => {
    pool.update(t);
    metrics.routingVersion.set(t.version);
  };
  source.onChange(follow);

  /** The cell for a namespace: from the table, or created by auto-tenants. */
  async function cellFor(namespace: string, bySession: boolean): Promise<CellState> {
    let route = source.table().routes.get(namespace);
    if (route === undefined) {
      if (bySession) fail('SESSION_NOT_FOUND', `the session's namespace "${namespace}" has no tenant, so the session does not exist`);
      if (!deps.autoTenants) fail('NAMESPACE_NOT_FOUND', `namespace "${namespace}" has no tenant: create it through the control plane`);
      let p = creating.get(namespace);
      if (!p) {
        p = source.createTenant(namespace).finally(() => creating.delete(namespace));
        creating.set(namespace, p);
        metrics.tenantsCreated.inc();
      }
      route = (await p).routes.get(namespace);
      if (route === undefined) fail('NAMESPACE_NOT_FOUND', `namespace "${namespace}" has no tenant`);
    }
    const cell = pool.cell(route!.cell);
    if (!cell) fail('NO_LEADER', `cell "${route!.cell}" of namespace "${namespace}" has no known replicas yet; retry`);
    return cell!;
  }

  /**
   * One attempt of a unary call on one replica, cancelled with the client's
   * call: by the node's lane (cheaper than a gRPC hop on both sides), or by
   * gRPC where the node speaks no lane. Either way the replica serves it as
   * forwarded already: a follower answers NOT_LEADER with a leader-hint
   * instead of forwarding the call itself, and the router calls the leader
   * directly from then on, saving a hop on every call.
   */
  function attempt<Res>(
    target: string,
    method: Method,
    req: unknown,
    deadlineMs: number,
    onCancel: (cancel: () => void) => void,
  ): Promise<Res> {
    const lane = pool.lane(target);
    if (lane.available) {
      return new Promise((resolve, reject) => {
        const cancel = lane.call(method, req, deadlineMs, (r) => {
          if (r.ok) {
            metrics.upstreamCalls.inc({ transport: 'lane' });
            resolve(r.value as Res);
          } else if ('error' in r) {
            metrics.upstreamCalls.inc({ transport: 'lane' });
            reject(r.error);
          } else {
            grpcAttempt<Res>(target, method, req, deadlineMs, onCancel).then(resolve, reject);
          }
        });
        // A cancelled lane call is never answered: settle the attempt here, as grpc-js does with CANCELLED.
        onCancel(() => {
          cancel();
          reject(new FencerError('CANCELLED', 'the client cancelled the call'));
        });
      });
    }
    return grpcAttempt(target, method, req, deadlineMs, onCancel);
  }

  function grpcAttempt<Res>(
    target: string,
    method: Method,
    req: unknown,
    deadlineMs: number,
    onCancel: (cancel: () => void) => void,
  ): Promise<Res> {
    const stub = pool.lockStub(target) as unknown as Record<string, (...args: unknown[]) => { cancel(): void }>;
    const md = new Metadata();
    md.set(FORWARDED_KEY, routerId);
    metrics.upstreamCalls.inc({ transport: 'grpc' });
    return new Promise((resolve, reject) => {
      const c = stub[method]!.call(stub, req, md, { deadline: deadlineMs }, (err: ServiceError | null, res: Res) =>
        err ? reject(fromServiceError(err)) : resolve(res),
      );
      onCancel(() => c.cancel());
    });
  }

  function unary<Req, Res>(method: Method) {
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
      const started = performance.now();
      let cellId = '';
      let cancelUpstream: (() => void) | undefined;
      let cancelled = false;
      let answered = false;
      // grpc-js says 'cancelled' after every answer too: only a call still running has anything to cancel.
      call.on('cancelled', () => {
        if (answered) return;
        cancelled = true;
        cancelUpstream?.();
      });
      const answer = (err: Partial<ServiceError> | null, res?: Res): void => {
        answered = true;
        metrics.calls.inc({ cell: cellId, method, code: err ? (status[err.code ?? status.UNKNOWN] ?? 'UNKNOWN') : 'OK' });
        metrics.callSeconds.observe({ cell: cellId, method }, (performance.now() - started) / 1000);
        if (err) callback(err as ServiceError);
        else callback(null, res);
      };
      const run = async (): Promise<Res> => {
        const req = call.request as unknown as Record<string, unknown>;
        const { namespace, bySession } = namespaceOfCall(method, req);
        const waitMs = method === 'acquire' && typeof req.waitMs === 'number' ? req.waitMs : 0;
        const deadlineMs = deadlineOf(call, waitMs);
        let refreshes = 0;
        for (let n = 0; ; n++) {
          const cell = await cellFor(namespace, bySession);
          cellId = cell.id;
          if (cell.inFlight >= inFlightMax)
            fail('TOO_MANY_REQUESTS', `cell ${cell.id} has ${inFlightMax} calls in flight from this router; retry with backoff`);
          const target = cell.target();
          cell.inFlight++;
          try {
            return await attempt<Res>(target, method, call.request, deadlineMs, (c) => (cancelUpstream = c));
          } catch (e) {
            if (cancelled) fail('CANCELLED', 'the client cancelled the call');
            const fe = e instanceof FencerError ? e : fromServiceError(e as ServiceError);
            let retry = false;
            let followHint = false;
            if (RETRY_CODES.has(fe.code)) {
              followHint =
                fe.code === 'NOT_LEADER' &&
                fe.leaderHint !== undefined &&
                fe.leaderHint !== target &&
                cell.replicas.includes(fe.leaderHint);
              if (followHint) cell.noteLeader(fe.leaderHint);
              else cell.advance(target);
              retry = true;
            } else if (fe.code === 'NAMESPACE_NOT_HERE' && refreshes < 3) {
              refreshes++;
              await source.refresh();
              retry = true;
            }
            // A fresh leader-hint is followed at once; anything else waits, growing.
            const pauseMs = followHint && n < 2 ? 0 : backoffMs(n);
            if (!retry || Date.now() + pauseMs >= deadlineMs) throw fe;
            metrics.retries.inc({ cell: cell.id, method, reason: fe.code });
            if (pauseMs > 0) await sleep(pauseMs);
          } finally {
            cell.inFlight--;
          }
        }
      };
      run().then(
        (res) => answer(null, res),
        (e) => answer(toClientError(e, logger, method)),
      );
    };
  }

  const watch = (call: ServerWritableStream<lockservice.WatchRequest, lockservice.WatchEvent>): void => {
    const req = call.request;
    let live = true;
    let upstream: ClientReadableStream<lockservice.WatchEvent> | undefined;
    let cell: CellState | undefined;
    let lastRevision = req.sinceRevision;
    let attemptNo = 0;
    const stop = (err?: Partial<ServiceError>): void => {
      if (!live) return;
      live = false;
      watches--;
      metrics.watches.set(watches);
      if (cell) {
        cell.inFlight--;
      }
      const u = upstream;
      upstream = undefined;
      u?.cancel();
      if (err) call.emit('error', err);
      else call.end();
    };
    if (watches >= WATCHES_MAX) {
      call.emit(
        'error',
        toServiceError(new FencerError('TOO_MANY_REQUESTS', `this router proxies ${WATCHES_MAX} watches already; retry elsewhere`)),
      );
      return;
    }
    watches++;
    metrics.watches.set(watches);
    call.on('cancelled', () => stop());
    call.on('close', () => stop());

    const open = async (): Promise<void> => {
      const { namespace } = namespaceOfCall('watch', req as unknown as Record<string, unknown>);
      const c = await cellFor(namespace, false);
      if (!live) return;
      if (!cell) {
        if (c.inFlight >= inFlightMax)
          fail('TOO_MANY_REQUESTS', `cell ${c.id} has ${inFlightMax} calls in flight from this router; retry with backoff`);
        cell = c;
        cell.inFlight++;
      }
      const target = c.target();
      const u = pool.lockStub(target).watch({ name: req.name, prefix: req.prefix, sinceRevision: lastRevision });
      upstream = u;
      u.on('data', (ev: lockservice.WatchEvent) => {
        if (upstream !== u) return;
        attemptNo = 0;
        // SNAPSHOT events describe the state at the stream's start; the PROGRESS after them carries that revision.
        if (ev.type !== lockservice.WatchEventType.WATCH_EVENT_TYPE_SNAPSHOT) lastRevision = Math.max(lastRevision, ev.revision);
        if (!call.write(ev)) {
          u.pause();
          call.once('drain', () => u.resume());
        }
      });
      u.on('error', (e: ServiceError) => {
        if (upstream !== u || !live) return;
        upstream = undefined;
        const fe = fromServiceError(e);
        if (fe.code === 'CANCELLED') return stop();
        const retryable = RETRY_CODES.has(fe.code) || fe.code === 'NAMESPACE_NOT_HERE';
        if (!retryable) return stop(toClientError(fe, logger, 'watch'));
        if (fe.code === 'NOT_LEADER' && fe.leaderHint) c.noteLeader(fe.leaderHint);
        else c.advance(target);
        metrics.retries.inc({ cell: c.id, method: 'watch', reason: fe.code });
        const pauseMs = backoffMs(attemptNo++);
        const resume = async (): Promise<void> => {
          if (fe.code === 'NAMESPACE_NOT_HERE') await source.refresh();
          await sleep(pauseMs);
          if (live) await open();
        };
        resume().catch((err) => stop(toClientError(err, logger, 'watch')));
      });
      u.on('end', () => {
        if (upstream === u) stop();
      });
    };
    open().catch((err) => stop(toClientError(err, logger, 'watch')));
  };

  const handlers: lockservice.LockServiceServer = {
    openSession: unary('openSession'),
    acquire: unary('acquire'),
    release: unary('release'),
    checkToken: unary('checkToken'),
    getLock: unary('getLock'),
    listLocks: unary('listLocks'),
    closeSession: unary('closeSession'),
    keepAlive: keepAlives.serve,
    watch,
  };

  return {
    metrics,
    pool,
    source,
    batcher,
    handlers,
    async listen(address: string): Promise<string> {
      await source.start();
      follow(source.table());
      batcher.start();
      server = await startLockServer(handlers, address);
      return server.address;
    },
    async close(): Promise<void> {
      batcher.close();
      source.close();
      await server?.close();
      pool.close();
    },
  };
}

/**
 * The contract's LockService on one node, over libs/cell's request API: the
 * cell validates each call and serves it on the leader or forwards it there
 * (once: a forwarded call that meets a non-leader is answered NOT_LEADER
 * with a leader-hint); KeepAlive heartbeats go through the leader's
 * confirmation round, relayed by a follower; Watch is served from this
 * replica's apply stream after a read barrier. This file only converts
 * between gRPC and the cell, and counts.
 */
import {
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServerDuplexStream,
  type ServiceError,
  status,
} from '@grpc/grpc-js';
import { FencerError, type Result } from '@fencer/base';
import {
  type CallContext,
  type CellMethod,
  type HeartbeatAnswer,
  type HubEvent,
  type RequestOf,
  type ResponseOf,
  type WatchSink,
  lockToWire,
} from '@fencer/cell';
import { bearerOf, namespaceOfSessionId, parseLockName, parseLockPrefix } from '@fencer/contract';
import { FORWARDED_KEY, internalpb, lockservice, toServiceError } from '@fencer/protocol';
import type { LaneDispatch } from '@fencer/peer-transport';

import type { NodeMetrics } from './metrics.js';
import type { CellNode } from './node.js';

type Pb = typeof lockservice;
const { WatchEventType } = lockservice as Pb;

/** How the call came (forwarded by a router or replica) and the token it presented (`authorization: Bearer`). */
function contextOf(call: { metadata: { get(key: string): unknown[] } }): CallContext {
  const token = bearerOf(call.metadata.get('authorization')[0]);
  return { forwarded: call.metadata.get(FORWARDED_KEY).length > 0, ...(token !== undefined ? { token } : {}) };
}

function watchEventToPb(e: HubEvent): lockservice.WatchEvent {
  switch (e.type) {
    case 'event':
      return {
        revision: e.event.revision,
        type: WatchEventType[`WATCH_EVENT_TYPE_${e.event.type}` as keyof typeof WatchEventType],
        name: e.event.name,
        sessionId: e.event.sessionId,
        token: e.event.token,
        lock: lockToWire(e.event.lock),
      };
    case 'snapshot':
      return {
        revision: e.revision,
        type: WatchEventType.WATCH_EVENT_TYPE_SNAPSHOT,
        name: e.lock.name,
        sessionId: '',
        token: 0,
        lock: lockToWire(e.lock),
      };
    case 'progress':
      return { revision: e.revision, type: WatchEventType.WATCH_EVENT_TYPE_PROGRESS, name: '', sessionId: '', token: 0, lock: undefined };
  }
}

/** The namespace a Watch names (a lock name, or a prefix); '' for a name the watch itself refuses as invalid. */
function watchNamespace(req: lockservice.WatchRequest): string {
  const parsed = req.prefix ? parseLockPrefix(req.name) : parseLockName(req.name);
  return parsed.ok ? parsed.namespace : '';
}

export class LockServiceImpl {
  /** Unary calls received and not yet answered (held-open Acquires included), forwarded ones too. */
  callsInFlight = 0;

  constructor(
    private readonly node: CellNode,
    private readonly metrics: NodeMetrics,
  ) {}

  /**
   * One unary call through the cell, whatever carried it: counted in flight
   * until answered or cancelled, and in fencer_rpcs_total by its status.
   * Returns how to cancel it (a held Acquire withdraws its wait).
   */
  private serve<M extends CellMethod>(
    method: M,
    request: RequestOf<M>,
    ctx: CallContext,
    done: (outcome: Result<ResponseOf<M>, FencerError>) => void,
  ): () => void {
    this.callsInFlight++;
    let inFlight = true;
    const finished = (): void => {
      if (!inFlight) return;
      inFlight = false;
      this.callsInFlight--;
    };
    const answer = (outcome: Result<ResponseOf<M>, FencerError>): void => {
      if (!inFlight) return;
      finished();
      this.metrics.rpcs.inc({ method, code: outcome.ok ? 'OK' : (status[toServiceError(outcome.error).code] ?? 'UNKNOWN') });
      done(outcome);
    };
    try {
      const cancel = this.node.cell.call(method, request, ctx, answer);
      return () => {
        finished();
        cancel();
      };
    } catch (e) {
      this.node.env.logger.error({ method, err: (e as Error)?.stack ?? String(e) }, 'unexpected error in a handler');
      answer({ ok: false, error: new FencerError('INTERNAL', `internal error: ${(e as Error)?.message ?? e}`) });
      return () => {};
    }
  }

  /** One unary gRPC call: errors become the contract's status with `lock-reason` (and `leader-hint`). */
  private unary<M extends CellMethod>(method: M) {
    return (call: ServerUnaryCall<RequestOf<M>, ResponseOf<M>>, callback: sendUnaryData<ResponseOf<M>>): void => {
      const cancel = this.serve(method, call.request, contextOf(call), (outcome) => {
        if (outcome.ok) callback(null, outcome.value);
        else callback(toServiceError(outcome.error) as ServiceError);
      });
      // A call the client gives up on is not answered.
      call.on('cancelled', cancel);
    };
  }

  /**
   * A unary call that came by the lane (a router's): served as a forwarded
   * call, so a follower answers NOT_LEADER with a leader-hint and the router
   * goes to the leader itself from then on.
   */
  lane: LaneDispatch = (method, request, answer, token) =>
    this.serve(
      method,
      request as RequestOf<typeof method>,
      token !== undefined ? { forwarded: true, token } : { forwarded: true },
      answer as (o: Result<unknown, FencerError>) => void,
    );

  openSession = this.unary('openSession');
  closeSession = this.unary('closeSession');
  release = this.unary('release');
  acquire = this.unary('acquire');
  checkToken = this.unary('checkToken');
  getLock = this.unary('getLock');
  listLocks = this.unary('listLocks');

  keepAlive = (call: ServerDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>): void => {
    let open = true;
    const ctx = contextOf(call);
    call.on('data', (req: lockservice.KeepAliveRequest) => {
      if (!open) return;
      // A session of a namespace the stream's token does not grant is refused, not extended (this replica's copy of the hashes).
      const refused = this.node.cell.refusal(namespaceOfSessionId(req.sessionId) ?? '', ctx.token);
      if (refused !== undefined) {
        open = false;
        call.emit('error', toServiceError(refused));
        return;
      }
      this.node.cell.heartbeat([req.sessionId], ctx, (r) => {
        if (!open) return;
        if (!r.ok) {
          open = false;
          call.emit('error', toServiceError(r.error));
          return;
        }
        for (const a of r.value) call.write(a);
      });
    });
    call.on('end', () => {
      open = false;
      call.end();
    });
    call.on('error', () => (open = false));
    call.on('cancelled', () => (open = false));
  };

  watch = (call: ServerWritableStream<lockservice.WatchRequest, lockservice.WatchEvent>): void => {
    const reject = (e: FencerError): void => {
      call.emit('error', toServiceError(e));
    };
    const sink: WatchSink = {
      write: (e) => {
        call.write(watchEventToPb(e));
        return call.writableLength;
      },
      end: (reason) => {
        if (reason === 'slow')
          reject(new FencerError('SLOW_WATCHER', 'this watcher fell too far behind; resume with since_revision = the last revision seen'));
        else reject(new FencerError('SHUTTING_DOWN', 'the node is shutting down; resume elsewhere with since_revision'));
      },
    };
    const req = call.request;
    // Checked on the replica that serves the watch, against its copy of the namespace's hashes.
    const refused = this.node.cell.refusal(watchNamespace(req), contextOf(call).token);
    if (refused !== undefined) return reject(refused);
    const stop = this.node.cell.watch({ name: req.name, prefix: req.prefix, sinceRevision: req.sinceRevision }, sink, (error) => {
      if (error) reject(error);
    });
    call.on('cancelled', stop);
    call.on('close', stop);
    call.on('error', stop);
  };

  /**
   * The leader's internal HeartbeatBatch (session proxies, and followers
   * relaying KeepAlive): never relayed again; counted in fencer_rpcs_total.
   * A session that came with its stream's token is checked against it first:
   * one its token does not grant is answered `forbidden`, not extended. A
   * relay from a follower carries no tokens: the follower checked each
   * session where its stream arrived.
   */
  heartbeatBatch = (
    call: ServerUnaryCall<internalpb.HeartbeatBatchRequest, internalpb.HeartbeatBatchResponse>,
    cb: sendUnaryData<internalpb.HeartbeatBatchResponse>,
  ): void => {
    const { sessionIds, tokens, tokenIndex } = call.request;
    const forbidden = new Set<number>();
    sessionIds.forEach((id, i) => {
      const at = tokenIndex[i] ?? 0;
      if (at === 0) return;
      if (this.node.cell.refusal(namespaceOfSessionId(id) ?? '', tokens[at - 1]) !== undefined) forbidden.add(i);
    });
    const admitted = forbidden.size === 0 ? sessionIds : sessionIds.filter((_, i) => !forbidden.has(i));
    this.node.cell.heartbeat(admitted, { forwarded: true }, (r: Result<HeartbeatAnswer[], FencerError>) => {
      if (r.ok) {
        this.metrics.rpcs.inc({ method: 'heartbeatBatch', code: 'OK' });
        return cb(null, { sessions: withForbidden(sessionIds, forbidden, r.value) });
      }
      const error = toServiceError(r.error);
      this.metrics.rpcs.inc({ method: 'heartbeatBatch', code: status[error.code] ?? 'UNKNOWN' });
      cb(error as ServiceError);
    });
  };
}

/** The batch's answers in its order: the cell's for the admitted sessions, `forbidden` for the others. */
function withForbidden(
  sessionIds: readonly string[],
  forbidden: ReadonlySet<number>,
  answers: HeartbeatAnswer[],
): internalpb.SessionHeartbeat[] {
  let next = 0;
  return sessionIds.map((sessionId, i) =>
    forbidden.has(i)
      ? { sessionId, ttlMsRemaining: 0, expired: false, forbidden: true }
      : { ...(answers[next++] as HeartbeatAnswer), forbidden: false },
  );
}

/** The LockService implementation object for grpc-js. */
export function lockServiceHandlers(impl: LockServiceImpl): lockservice.LockServiceServer {
  return {
    openSession: impl.openSession,
    keepAlive: impl.keepAlive,
    acquire: impl.acquire,
    release: impl.release,
    checkToken: impl.checkToken,
    getLock: impl.getLock,
    listLocks: impl.listLocks,
    watch: impl.watch,
    closeSession: impl.closeSession,
  };
}

export function internalHandlers(impl: LockServiceImpl): internalpb.CellInternalServer {
  return { heartbeatBatch: impl.heartbeatBatch };
}

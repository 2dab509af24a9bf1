/**
 * How a follower reaches the leader: unary calls forwarded to the leader's
 * LockService and heartbeats relayed in one HeartbeatBatch, each marked
 * forwarded so the leader never forwards it again. The cell library decides
 * when to forward and times the call out (timers of any length, chained);
 * this only carries it. `LaneForwarder` carries unary calls by the leader's
 * lane (@fencer/peer-transport LaneClient, as a router does: a lane call is served as a
 * forwarded one and costs the leader a fraction of a gRPC call), and falls
 * back to `GrpcForwarder` for a leader that speaks no lane.
 */
import { type ChannelCredentials, Metadata, credentials, type ServiceError, status } from '@grpc/grpc-js';
import { FencerError, type Result, err, ok } from '@fencer/base';
import type { CallDone, Cancel, CellMethod, HeartbeatAnswer, LeaderForwarder, RequestOf, ResponseOf } from '@fencer/cell';
import { FORWARDED_KEY, fromServiceError, internalpb, lockservice } from '@fencer/protocol';
import { type AcceptsIdentity, LaneClient, grpcChannelCredentials, limits as laneLimits } from '@fencer/peer-transport';
import type { TlsFiles } from '@fencer/service';

/** Mutual TLS to the leader: this node's files, and the leader taken only when its certificate names a replica of this cell. */
export interface ForwardTls {
  readonly files: TlsFiles;
  readonly accepts: AcceptsIdentity;
}

type Unary = (req: unknown, md: Metadata, cb: (err: ServiceError | null, res: unknown) => void) => { cancel(): void };

export class GrpcForwarder implements LeaderForwarder {
  private readonly lockClients = new Map<string, InstanceType<typeof lockservice.LockServiceClient>>();
  private readonly internalClients = new Map<string, InstanceType<typeof internalpb.CellInternalClient>>();

  constructor(
    private readonly selfId: string,
    private readonly tls?: ForwardTls,
  ) {}

  private credentials(): ChannelCredentials {
    return this.tls === undefined ? credentials.createInsecure() : grpcChannelCredentials(this.tls.files, this.tls.accepts);
  }

  forward<M extends CellMethod>(
    _leader: string,
    address: string,
    method: M,
    request: RequestOf<M>,
    done: CallDone<ResponseOf<M>>,
    token?: string,
  ): Cancel {
    let c = this.lockClients.get(address);
    if (!c) this.lockClients.set(address, (c = new lockservice.LockServiceClient(address, this.credentials())));
    const client = c as unknown as Record<string, Unary>;
    const md = this.metadata();
    // The caller's token goes with its call: the leader checks it.
    if (token !== undefined) md.set('authorization', `Bearer ${token}`);
    const call = client[method]!.call(client, request, md, (e, res) => {
      if (e) return done(err(this.leaderError(e, address)));
      done(ok(res as ResponseOf<M>));
    });
    return () => call.cancel();
  }

  heartbeats(
    _leader: string,
    address: string,
    sessionIds: readonly string[],
    done: (r: Result<HeartbeatAnswer[], FencerError>) => void,
  ): Cancel {
    let c = this.internalClients.get(address);
    if (!c) this.internalClients.set(address, (c = new internalpb.CellInternalClient(address, this.credentials())));
    const call = c.heartbeatBatch(
      { sessionIds: [...sessionIds], proxyId: this.selfId, tokens: [], tokenIndex: [] },
      this.metadata(),
      (e: ServiceError | null, res: internalpb.HeartbeatBatchResponse) => {
        if (e) return done(err(new FencerError('NO_LEADER', `heartbeat relay to ${address} failed: ${e.details}`, address)));
        done(ok(res.sessions));
      },
    );
    return () => call.cancel();
  }

  close(): void {
    for (const c of this.lockClients.values()) c.close();
    for (const c of this.internalClients.values()) c.close();
  }

  private metadata(): Metadata {
    const md = new Metadata();
    md.set(FORWARDED_KEY, this.selfId);
    return md;
  }

  /** The leader's own answer as it gave it; a leader that did not answer at all, in the contract's words. */
  private leaderError(e: ServiceError, address: string): FencerError {
    if (
      e.metadata?.get('lock-reason').length === 0 &&
      (e.code === status.UNAVAILABLE || e.code === status.DEADLINE_EXCEEDED || e.code === status.CANCELLED)
    ) {
      return new FencerError('NO_LEADER', `the leader at ${address} did not answer: ${e.details}`, address);
    }
    return fromServiceError(e);
  }
}

/**
 * A lane call's deadline: none of its own. The cell times a forwarded call
 * out and cancels it (which tells the leader CANCEL); the lane client clamps
 * this to the longest timer Node has.
 */
const LANE_DEADLINE_MS = laneLimits.timerDelayMsMax;

export type ForwardTransport = 'lane' | 'grpc';

export class LaneForwarder implements LeaderForwarder {
  private readonly lanes = new Map<string, { lane: LaneClient; inFlight: number }>();

  /**
   * `onForward`: called once per call with the transport that carried it (for metrics).
   * `laneCallsMax`: calls in flight on one leader's lane before the next go by gRPC (the lane's own bound).
   */
  constructor(
    private readonly grpc: GrpcForwarder,
    private readonly onForward: (transport: ForwardTransport) => void = () => {},
    private readonly laneCallsMax = laneLimits.laneCallsMax,
    private readonly tls?: ForwardTls,
  ) {}

  forward<M extends CellMethod>(
    leader: string,
    address: string,
    method: M,
    request: RequestOf<M>,
    done: CallDone<ResponseOf<M>>,
    token?: string,
  ): Cancel {
    let to = this.lanes.get(address);
    if (!to) this.lanes.set(address, (to = { lane: new LaneClient(address, this.tls), inFlight: 0 }));
    const lane = to.lane;
    // A lane connection carries laneCallsMax calls at once (held-open Acquires count); beyond, gRPC has no such bound.
    if (!lane.available || to.inFlight >= this.laneCallsMax) return this.byGrpc(leader, address, method, request, done, token);
    const slot = to;
    slot.inFlight++;
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      slot.inFlight--;
    };
    let fallback: Cancel | undefined;
    const cancel = lane.call(
      method,
      request,
      Date.now() + LANE_DEADLINE_MS,
      (r) => {
        settle();
        if (r.ok) {
          this.onForward('lane');
          done(ok(r.value as ResponseOf<M>));
        } else if ('error' in r) {
          this.onForward('lane');
          // A lost connection says nothing of the leader's answer: NO_LEADER naming where it was, as over gRPC.
          const e = r.error;
          done(err(e.code === 'NO_LEADER' && e.leaderHint === undefined ? new FencerError('NO_LEADER', e.message, address) : e));
        } else fallback = this.byGrpc(leader, address, method, request, done, token);
      },
      token,
    );
    return () => {
      settle();
      cancel();
      fallback?.();
    };
  }

  heartbeats(
    leader: string,
    address: string,
    sessionIds: readonly string[],
    done: (r: Result<HeartbeatAnswer[], FencerError>) => void,
  ): Cancel {
    return this.grpc.heartbeats(leader, address, sessionIds, done);
  }

  close(): void {
    for (const { lane } of this.lanes.values()) lane.close();
    this.lanes.clear();
    this.grpc.close();
  }

  private byGrpc<M extends CellMethod>(
    leader: string,
    address: string,
    method: M,
    request: RequestOf<M>,
    done: CallDone<ResponseOf<M>>,
    token?: string,
  ): Cancel {
    this.onForward('grpc');
    return this.grpc.forward(leader, address, method, request, done, token);
  }
}

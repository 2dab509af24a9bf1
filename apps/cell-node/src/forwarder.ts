/**
 * How a follower reaches the leader: unary calls forwarded to the leader's
 * LockService and heartbeats relayed in one HeartbeatBatch, each marked
 * forwarded so the leader never forwards it again. The cell library decides
 * when to forward and times the call out (timers of any length, chained);
 * this only carries it.
 */
import { Metadata, credentials, type ServiceError, status } from '@grpc/grpc-js';
import { FencerError, type Result, err, ok } from '@fencer/base';
import type { CallDone, Cancel, CellMethod, HeartbeatAnswer, LeaderForwarder, RequestOf, ResponseOf } from '@fencer/cell';
import { FORWARDED_KEY, fromServiceError, internalpb, lockservice } from '@fencer/protocol';

type Unary = (req: unknown, md: Metadata, cb: (err: ServiceError | null, res: unknown) => void) => { cancel(): void };

export class GrpcForwarder implements LeaderForwarder {
  private readonly lockClients = new Map<string, InstanceType<typeof lockservice.LockServiceClient>>();
  private readonly internalClients = new Map<string, InstanceType<typeof internalpb.CellInternalClient>>();

  constructor(private readonly selfId: string) {}

  forward<M extends CellMethod>(_leader: string, address: string, method: M, request: RequestOf<M>, done: CallDone<ResponseOf<M>>): Cancel {
    let c = this.lockClients.get(address);
    if (!c) this.lockClients.set(address, (c = new lockservice.LockServiceClient(address, credentials.createInsecure())));
    const client = c as unknown as Record<string, Unary>;
    const call = client[method]!.call(client, request, this.metadata(), (e, res) => {
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
    if (!c) this.internalClients.set(address, (c = new internalpb.CellInternalClient(address, credentials.createInsecure())));
    const call = c.heartbeatBatch(
      { sessionIds: [...sessionIds], proxyId: this.selfId },
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

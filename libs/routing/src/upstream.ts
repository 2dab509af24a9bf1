/**
 * One attempt of a unary call on one replica, cancelled with the client's
 * call: by the node's lane (cheaper than a gRPC hop on both sides), or by
 * gRPC where the node speaks no lane. Either way the replica serves it as
 * forwarded already: a follower answers NOT_LEADER with a leader-hint
 * instead of forwarding the call itself, and the router calls the leader
 * directly from then on, saving a hop on every call.
 */
import { FencerError } from '@fencer/base';
import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { FORWARDED_KEY, fromServiceError } from '@fencer/protocol';
import type { CellPool } from './cell-pool.js';
import type { RouterMetrics } from './metrics.js';
import type { UnaryMethod } from './namespace-of-call.js';

/** Sends `req` to `target`; `onCancel` is given the way to cancel this attempt when the client cancels. */
export type Attempt = <Res>(
  target: string,
  method: UnaryMethod,
  req: unknown,
  deadlineMs: number,
  onCancel: (cancel: () => void) => void,
  /** The client's token, passed on for the cell to check. */
  token?: string,
) => Promise<Res>;

/** The attempts of a router named `routerId` (the FORWARDED_KEY metadata of its gRPC calls). */
export function upstreamAttempt(pool: CellPool, metrics: RouterMetrics, routerId: string): Attempt {
  const grpcAttempt: Attempt = <Res>(...[target, method, req, deadlineMs, onCancel, token]: Parameters<Attempt>): Promise<Res> => {
    const stub = pool.lockStub(target) as unknown as Record<string, (...args: unknown[]) => { cancel(): void }>;
    const md = new Metadata();
    md.set(FORWARDED_KEY, routerId);
    if (token !== undefined) md.set('authorization', `Bearer ${token}`);
    metrics.upstreamCalls.inc({ transport: 'grpc' });
    return new Promise((resolve, reject) => {
      const c = stub[method]!.call(stub, req, md, { deadline: deadlineMs }, (err: ServiceError | null, res: Res) =>
        err ? reject(fromServiceError(err)) : resolve(res),
      );
      onCancel(() => c.cancel());
    });
  };
  return <Res>(...args: Parameters<Attempt>): Promise<Res> => {
    const [target, method, req, deadlineMs, onCancel, token] = args;
    const lane = pool.lane(target);
    if (!lane.available) return grpcAttempt<Res>(...args);
    return new Promise((resolve, reject) => {
      const cancel = lane.call(
        method,
        req,
        deadlineMs,
        (r) => {
          if (r.ok) {
            metrics.upstreamCalls.inc({ transport: 'lane' });
            resolve(r.value as Res);
          } else if ('error' in r) {
            metrics.upstreamCalls.inc({ transport: 'lane' });
            reject(r.error);
          } else {
            // The node speaks no lane after all: the same attempt by gRPC.
            grpcAttempt<Res>(...args).then(resolve, reject);
          }
        },
        token,
      );
      // A cancelled lane call is never answered: settle the attempt here, as grpc-js does with CANCELLED.
      onCancel(() => {
        cancel();
        reject(new FencerError('CANCELLED', 'the client cancelled the call'));
      });
    });
  };
}

/**
 * Serves the contract's KeepAlive stream over a HeartbeatBatcher: each
 * message is one session's heartbeat, answered with that session's TTL left
 * (or expired) once its cell leader acknowledged the batch that carried it.
 * One stream may carry many sessions. Streams per process and heartbeats
 * waiting per stream are bounded; beyond, the stream ends with
 * RESOURCE_EXHAUSTED TOO_MANY_REQUESTS.
 */
import { FencerError } from '@fencer/base';
import type { ServerDuplexStream, ServiceError } from '@grpc/grpc-js';
import { toServiceError, type lockservice } from '@fencer/protocol';
import type { HeartbeatBatcher, HeartbeatDone } from './heartbeat-batcher.js';
import { KEEPALIVE_STREAMS_MAX, STREAM_PENDING_MAX } from './limits.js';
import type { RouterMetrics } from './metrics.js';
import { missingToken, tokenOf } from './auth.js';

type Stream = ServerDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>;

export class KeepAliveStreams {
  private open = 0;

  constructor(
    private readonly batcher: HeartbeatBatcher,
    private readonly metrics: RouterMetrics,
    private readonly streamsMax = KEEPALIVE_STREAMS_MAX,
    private readonly pendingMax = STREAM_PENDING_MAX,
    /** A fleet with tenant tokens: a stream without one is refused; each session goes to its leader with the stream's token. */
    private readonly auth = false,
  ) {}

  get streams(): number {
    return this.open;
  }

  serve = (call: Stream): void => {
    if (this.open >= this.streamsMax) {
      call.emit(
        'error',
        toServiceError(
          new FencerError('TOO_MANY_REQUESTS', `this process serves ${this.streamsMax} KeepAlive streams already; connect to another`),
        ) as ServiceError,
      );
      return;
    }
    // The stream's token (when it has one) goes with each of its heartbeats: the leader checks the session's namespace against it.
    const token = tokenOf(call);
    if (this.auth && token === undefined) {
      call.emit('error', toServiceError(missingToken()) as ServiceError);
      return;
    }
    this.open++;
    this.metrics.streams.set(this.open);
    let live = true;
    let pending = 0;
    const finish = (): void => {
      if (!live) return;
      live = false;
      this.open--;
      this.metrics.streams.set(this.open);
    };
    const fail = (e: FencerError): void => {
      if (!live) return;
      finish();
      call.emit('error', toServiceError(e) as ServiceError);
    };
    // One answer callback per stream, shared by its heartbeats: the answer is written as it came (it has the
    // response's fields), so a heartbeat allocates nothing here.
    const answer: HeartbeatDone = (a) => {
      pending--;
      if (!live) return;
      if (a instanceof FencerError) return fail(a);
      call.write(a);
    };
    call.on('data', (req: lockservice.KeepAliveRequest) => {
      if (!live) return;
      if (pending >= this.pendingMax) {
        return fail(
          new FencerError(
            'TOO_MANY_REQUESTS',
            `at most ${this.pendingMax} heartbeats may wait on one stream; spread sessions over more streams or heartbeat less often`,
          ),
        );
      }
      pending++;
      this.batcher.heartbeat(req.sessionId, answer, token);
    });
    call.on('end', () => {
      finish();
      call.end();
    });
    call.on('error', finish);
    call.on('cancelled', finish);
    call.on('close', finish);
  };
}

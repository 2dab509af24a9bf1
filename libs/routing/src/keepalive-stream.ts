/**
 * Serves the contract's KeepAlive stream over a HeartbeatBatcher: each
 * message is one session's heartbeat, answered with that session's TTL left
 * (or expired) once its cell leader acknowledged the batch that carried it.
 * One stream may carry many sessions. Streams per process and heartbeats
 * waiting per stream are bounded; beyond, the stream ends with
 * RESOURCE_EXHAUSTED TOO_MANY_REQUESTS.
 *
 * Two transports share that accounting: `serveRaw`, the stream read and
 * written on node:http2 directly (keepalive-h2.ts; what the front ends
 * serve, lock-server.ts routes the method's streams to it), and `serve`,
 * grpc-js's call object (kept for a server without the raw route).
 */
import { FencerError } from '@fencer/base';
import type { ServerDuplexStream, ServiceError } from '@grpc/grpc-js';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { toServiceError, type lockservice } from '@fencer/protocol';
import type { HeartbeatAnswer, HeartbeatBatcher, HeartbeatDone } from './heartbeat-batcher.js';
import { RawKeepAliveCall } from './keepalive-h2.js';
import { KEEPALIVE_STREAMS_MAX, STREAM_PENDING_MAX } from './limits.js';
import type { RouterMetrics } from './metrics.js';

type Stream = ServerDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>;

/** What a transport does with a stream's answers. */
interface Sink {
  write(a: HeartbeatAnswer): void;
  fail(e: FencerError): void;
}

/** A stream's side of the accounting: its requests, and its end (idempotent). */
interface Tracked {
  request(sessionId: string): void;
  finish(): void;
}

export class KeepAliveStreams {
  private open = 0;
  /** Every stream open now, to end them when the front end stops. */
  private readonly live = new Set<Sink>();

  constructor(
    private readonly batcher: HeartbeatBatcher,
    private readonly metrics: RouterMetrics,
    private readonly streamsMax = KEEPALIVE_STREAMS_MAX,
    private readonly pendingMax = STREAM_PENDING_MAX,
  ) {}

  get streams(): number {
    return this.open;
  }

  /** A KeepAlive stream served by grpc-js. */
  serve = (call: Stream): void => {
    const fail = (e: FencerError): void => void call.emit('error', toServiceError(e) as ServiceError);
    const t = this.track({ write: (a) => call.write(a), fail });
    if (t === undefined) return;
    call.on('data', (req: lockservice.KeepAliveRequest) => t.request(req.sessionId));
    call.on('end', () => {
      t.finish();
      call.end();
    });
    call.on('error', t.finish);
    call.on('cancelled', t.finish);
    call.on('close', t.finish);
  };

  /** A KeepAlive stream read and written on node:http2 directly (keepalive-h2.ts). */
  serveRaw = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void => {
    const call = new RawKeepAliveCall(stream, headers);
    const t = this.track({ write: (a) => call.answer(a.sessionId, a.ttlMsRemaining, a.expired), fail: (e) => call.fail(e) });
    if (t === undefined) return;
    call.start({
      request: t.request,
      end: () => {
        t.finish();
        call.finish();
      },
      closed: t.finish,
    });
  };

  /** Ends every open stream with SHUTTING_DOWN (its client reconnects to another front end). */
  close(): void {
    const gone = new FencerError('SHUTTING_DOWN', 'this front end is shutting down; reconnect to another');
    for (const s of [...this.live]) s.fail(gone);
  }

  /**
   * Counts a new stream (refused with TOO_MANY_REQUESTS past streamsMax:
   * undefined) and bounds the heartbeats waiting on it. One answer callback
   * per stream, shared by its heartbeats: a heartbeat allocates nothing here.
   */
  private track(sink: Sink): Tracked | undefined {
    if (this.open >= this.streamsMax) {
      sink.fail(
        new FencerError('TOO_MANY_REQUESTS', `this process serves ${this.streamsMax} KeepAlive streams already; connect to another`),
      );
      return undefined;
    }
    this.open++;
    this.metrics.streams.set(this.open);
    let live = true;
    let pending = 0;
    const finish = (): void => {
      if (!live) return;
      live = false;
      this.live.delete(stopper);
      this.open--;
      this.metrics.streams.set(this.open);
    };
    const fail = (e: FencerError): void => {
      if (!live) return;
      finish();
      sink.fail(e);
    };
    const stopper: Sink = { write: () => {}, fail };
    this.live.add(stopper);
    const answer: HeartbeatDone = (a) => {
      pending--;
      if (!live) return;
      if (a instanceof FencerError) return fail(a);
      sink.write(a);
    };
    const request = (sessionId: string): void => {
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
      this.batcher.heartbeat(sessionId, answer);
    };
    return { request, finish };
  }
}

/**
 * Watch through the router: the stream is proxied from the cell with
 * cancellation both ways, and resumed, after its replica goes away, from
 * the last revision passed on, so the client sees no gap and no repeat.
 * Watches per router are bounded (WATCHES_MAX), and a watch counts as one
 * call in flight towards its cell for as long as it lasts.
 */
import { FencerError } from '@fencer/base';
import { type ClientReadableStream, Metadata, type ServerWritableStream, type ServiceError } from '@grpc/grpc-js';
import { fromServiceError, lockservice, toServiceError } from '@fencer/protocol';
import type { Logger } from 'pino';
import type { CellPool, CellState } from './cell-pool.js';
import type { CellOf } from './cell-of-namespace.js';
import { WATCHES_MAX } from './limits.js';
import type { RouterMetrics } from './metrics.js';
import { fail, namespaceOfCall } from './namespace-of-call.js';
import { RETRY_CODES, backoffMs, sleep, toClientError } from './retry-policy.js';
import type { RoutingSource } from './routing-source.js';
import { missingToken, tokenOf } from './auth.js';

type WatchCall = ServerWritableStream<lockservice.WatchRequest, lockservice.WatchEvent>;

export interface WatchDeps {
  readonly source: RoutingSource;
  readonly pool: CellPool;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  readonly cellOf: CellOf;
  readonly inFlightMax: number;
  /** A fleet with tenant tokens: a watch without one is refused here; the cell checks the one it has. */
  readonly auth?: boolean;
}

/** The Watch handler of a router, counting the watches it proxies. */
export class WatchProxies {
  private open = 0;

  constructor(private readonly deps: WatchDeps) {}

  serve = (call: WatchCall): void => {
    if (this.open >= WATCHES_MAX) {
      call.emit(
        'error',
        toServiceError(new FencerError('TOO_MANY_REQUESTS', `this router proxies ${WATCHES_MAX} watches already; retry elsewhere`)),
      );
      return;
    }
    this.count(+1);
    const watch = new ProxiedWatch(this.deps, call, () => this.count(-1));
    call.on('cancelled', () => watch.stop());
    call.on('close', () => watch.stop());
    watch.open().catch((err) => watch.stop(toClientError(err, this.deps.logger, 'watch')));
  };

  private count(delta: number): void {
    this.open += delta;
    this.deps.metrics.watches.set(this.open);
  }
}

/** One client's watch and the upstream stream that feeds it now. */
class ProxiedWatch {
  private live = true;
  private upstream: ClientReadableStream<lockservice.WatchEvent> | undefined;
  /** The cell the watch counts against (set by the first open, kept across resumes). */
  private cell: CellState | undefined;
  /** The newest revision passed on to the client: a resumed stream starts after it. */
  private lastRevision: number;
  /** Resumes since the last event, for the backoff. */
  private attemptNo = 0;

  constructor(
    private readonly deps: WatchDeps,
    private readonly call: WatchCall,
    private readonly ended: () => void,
  ) {
    this.lastRevision = call.request.sinceRevision;
  }

  /** Ends the watch once: the upstream is cancelled, and the client gets `err` or the stream's end. */
  stop(err?: Partial<ServiceError>): void {
    if (!this.live) return;
    this.live = false;
    this.ended();
    if (this.cell) this.cell.inFlight--;
    const u = this.upstream;
    this.upstream = undefined;
    u?.cancel();
    if (err) this.call.emit('error', err);
    else this.call.end();
  }

  /** Opens (or reopens) the upstream stream on the namespace's cell, from the last revision passed on. */
  async open(): Promise<void> {
    const req = this.call.request;
    const { namespace } = namespaceOfCall('watch', req as unknown as Record<string, unknown>);
    const token = tokenOf(this.call);
    if (this.deps.auth === true && token === undefined) throw missingToken();
    const c = await this.deps.cellOf(namespace, false);
    if (!this.live) return;
    if (!this.cell) {
      if (c.inFlight >= this.deps.inFlightMax)
        fail('TOO_MANY_REQUESTS', `cell ${c.id} has ${this.deps.inFlightMax} calls in flight from this router; retry with backoff`);
      this.cell = c;
      this.cell.inFlight++;
    }
    const target = c.target();
    // The client's token goes with the stream: the cell that serves it checks it.
    const md = new Metadata();
    if (token !== undefined) md.set('authorization', `Bearer ${token}`);
    const u = this.deps.pool.lockStub(target).watch({ name: req.name, prefix: req.prefix, sinceRevision: this.lastRevision }, md);
    this.upstream = u;
    u.on('data', (ev: lockservice.WatchEvent) => {
      if (this.upstream === u) this.passOn(u, ev);
    });
    u.on('error', (e: ServiceError) => {
      if (this.upstream !== u || !this.live) return;
      this.upstream = undefined;
      this.upstreamFailed(c, target, fromServiceError(e));
    });
    u.on('end', () => {
      if (this.upstream === u) this.stop();
    });
  }

  private passOn(u: ClientReadableStream<lockservice.WatchEvent>, ev: lockservice.WatchEvent): void {
    this.attemptNo = 0;
    // SNAPSHOT events describe the state at the stream's start; the PROGRESS after them carries that revision.
    if (ev.type !== lockservice.WatchEventType.WATCH_EVENT_TYPE_SNAPSHOT) this.lastRevision = Math.max(this.lastRevision, ev.revision);
    if (!this.call.write(ev)) {
      u.pause();
      this.call.once('drain', () => u.resume());
    }
  }

  /** The upstream ended in error: the client gets it, or the watch resumes on the cell's next target after a pause. */
  private upstreamFailed(c: CellState, target: string, fe: FencerError): void {
    if (fe.code === 'CANCELLED') return this.stop();
    const retryable = RETRY_CODES.has(fe.code) || fe.code === 'NAMESPACE_NOT_HERE';
    if (!retryable) return this.stop(toClientError(fe, this.deps.logger, 'watch'));
    if (fe.code === 'NOT_LEADER' && fe.leaderHint) c.noteLeader(fe.leaderHint);
    else c.advance(target);
    this.deps.metrics.retries.inc({ cell: c.id, method: 'watch', reason: fe.code });
    const pauseMs = backoffMs(this.attemptNo++);
    const resume = async (): Promise<void> => {
      if (fe.code === 'NAMESPACE_NOT_HERE') await this.deps.source.refresh();
      await sleep(pauseMs);
      if (this.live) await this.open();
    };
    resume().catch((err) => this.stop(toClientError(err, this.deps.logger, 'watch')));
  }
}

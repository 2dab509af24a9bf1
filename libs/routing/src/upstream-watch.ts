/**
 * One Watch stream from the router to a namespace's cell, kept open for its
 * owner: after a retryable failure (the replica went away, NOT_LEADER,
 * NAMESPACE_MOVING, NAMESPACE_NOT_HERE after a move) it reopens on the
 * cell's next target, or on the namespace's new cell, from the revision its
 * owner names, after a backoff. It counts as one call in flight towards the
 * cell it first opened on for as long as it lasts.
 *
 * Its owner is either one client's watch (watch-proxy.ts) or a group of
 * identical client watches sharing it (watch-group.ts).
 */
import type { FencerError } from '@fencer/base';
import { type ClientReadableStream, Metadata, type ServiceError } from '@grpc/grpc-js';
import { fromServiceError, type lockservice } from '@fencer/protocol';
import type { Logger } from 'pino';
import type { CellPool, CellState } from './cell-pool.js';
import type { CellOf } from './cell-of-namespace.js';
import type { RouterMetrics } from './metrics.js';
import { fail, namespaceOfCall } from './namespace-of-call.js';
import { RETRY_CODES, backoffMs, sleep, toClientError } from './retry-policy.js';
import type { RoutingSource } from './routing-source.js';

export interface WatchDeps {
  readonly source: RoutingSource;
  readonly pool: CellPool;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  readonly cellOf: CellOf;
  readonly inFlightMax: number;
  /** A fleet with tenant tokens: a watch without one is refused (watch-proxy.ts); the cell checks the one it has. */
  readonly auth?: boolean;
}

/** What a watch filter is: the lock name or prefix of a WatchRequest. */
export interface WatchTarget {
  readonly name: string;
  readonly prefix: boolean;
  /** The client's token: it goes with every upstream stream, and the cell that serves one checks it (decision 0016). */
  readonly token?: string | undefined;
}

/** The owner of an upstream: where its events go, and where it resumes from. */
export interface UpstreamOwner {
  /** The since_revision of the next (re)open. */
  since(): number;
  /** An event from the stream in force (never from one already replaced). */
  event(ev: lockservice.WatchEvent): void;
  /** The upstream ended for good: with the client's error, or without one (the stream's own end). */
  ended(err?: Partial<ServiceError>): void;
}

export class UpstreamWatch {
  private live = true;
  private stream: ClientReadableStream<lockservice.WatchEvent> | undefined;
  /** The cell the stream counts against (set by the first open, kept across resumes). */
  private cell: CellState | undefined;
  /** Resumes since the last event, for the backoff. */
  private attemptNo = 0;

  constructor(
    private readonly deps: WatchDeps,
    readonly target: WatchTarget,
    private readonly owner: UpstreamOwner,
  ) {}

  /** Opens the stream; a failure to open ends it through the owner. */
  start(): void {
    this.deps.metrics.watchUpstreams.inc();
    this.open().catch((err) => this.finish(toClientError(err, this.deps.logger, 'watch')));
  }

  /** Cancels the stream and frees its slot; the owner hears nothing more. */
  stop(): void {
    if (!this.live) return;
    this.live = false;
    this.deps.metrics.watchUpstreams.dec();
    if (this.cell) this.cell.inFlight--;
    const s = this.stream;
    this.stream = undefined;
    s?.cancel();
  }

  /** Backpressure from a single owner: stop reading until resume(). */
  pause(): void {
    this.stream?.pause();
  }

  resume(): void {
    this.stream?.resume();
  }

  private finish(err?: Partial<ServiceError>): void {
    if (!this.live) return;
    this.stop();
    this.owner.ended(err);
  }

  /** Opens (or reopens) the stream on the namespace's cell, from the owner's revision. */
  private async open(): Promise<void> {
    const { namespace } = namespaceOfCall('watch', this.target as unknown as Record<string, unknown>);
    const c = await this.deps.cellOf(namespace, false);
    if (!this.live) return;
    if (!this.cell) {
      if (c.inFlight >= this.deps.inFlightMax)
        fail('TOO_MANY_REQUESTS', `cell ${c.id} has ${this.deps.inFlightMax} calls in flight from this router; retry with backoff`);
      this.cell = c;
      this.cell.inFlight++;
    }
    const target = c.target();
    const req = { name: this.target.name, prefix: this.target.prefix, sinceRevision: this.owner.since() };
    const md = new Metadata();
    if (this.target.token !== undefined) md.set('authorization', `Bearer ${this.target.token}`);
    const s = this.deps.pool.lockStub(target).watch(req, md);
    this.stream = s;
    s.on('data', (ev: lockservice.WatchEvent) => {
      if (this.stream !== s) return;
      this.attemptNo = 0;
      this.owner.event(ev);
    });
    s.on('error', (e: ServiceError) => {
      if (this.stream !== s || !this.live) return;
      this.stream = undefined;
      this.failed(c, target, fromServiceError(e));
    });
    s.on('end', () => {
      if (this.stream === s) this.finish();
    });
  }

  /** The stream ended in error: the owner gets it, or the stream resumes on the cell's next target after a pause. */
  private failed(c: CellState, target: string, fe: FencerError): void {
    if (fe.code === 'CANCELLED') return this.finish();
    const retryable = RETRY_CODES.has(fe.code) || fe.code === 'NAMESPACE_NOT_HERE';
    if (!retryable) return this.finish(toClientError(fe, this.deps.logger, 'watch'));
    if (fe.code === 'NOT_LEADER' && fe.leaderHint) c.noteLeader(fe.leaderHint);
    else c.advance(target);
    this.deps.metrics.retries.inc({ cell: c.id, method: 'watch', reason: fe.code });
    const pauseMs = backoffMs(this.attemptNo++, fe.code);
    const resume = async (): Promise<void> => {
      if (fe.code === 'NAMESPACE_NOT_HERE') await this.deps.source.refresh();
      await sleep(pauseMs);
      if (this.live) await this.open();
    };
    resume().catch((err) => this.finish(toClientError(err, this.deps.logger, 'watch')));
  }
}

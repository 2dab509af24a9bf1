/**
 * Watch through the router. Each client watch first reads from its own
 * upstream stream on the namespace's cell (upstream-watch.ts), resumed
 * after its replica goes away with no gap and no repeat (watch-cursor.ts).
 * With coalescing on (the default), it moves to the group of identical
 * watches (watch-group.ts) as soon as it holds a revision the group can
 * continue from: at once for a since_revision the group's buffer reaches,
 * else at the first PROGRESS of its own stream (for a watch from now, the
 * one that closes its snapshot, so the cell still makes every start
 * linearizable). Its own stream is then cancelled: the cell serves one
 * stream per group, however many clients watch.
 *
 * Watches per router are bounded (WATCHES_MAX); every upstream stream
 * counts as one call in flight towards its cell for as long as it lasts.
 */
import { FencerError } from '@fencer/base';
import type { ServerWritableStream, ServiceError } from '@grpc/grpc-js';
import { lockservice, toServiceError } from '@fencer/protocol';
import { WATCH_MEMBER_BACKLOG_MAX, WATCHES_MAX } from './limits.js';
import { namespaceOfCall } from './namespace-of-call.js';
import { toClientError } from './retry-policy.js';
import { UpstreamWatch, type WatchDeps, type WatchTarget } from './upstream-watch.js';
import { WatchCursor } from './watch-cursor.js';
import { WatchGroups, type GroupMember, type WatchGroup } from './watch-group.js';

export type { WatchDeps } from './upstream-watch.js';

type WatchCall = ServerWritableStream<lockservice.WatchRequest, lockservice.WatchEvent>;

export interface WatchOptions {
  /** Share one upstream stream among identical watches (default true). */
  readonly coalesce?: boolean;
  /** Events a group member's stream may hold unsent before it is cut with SLOW_WATCHER. */
  readonly memberBacklogMax?: number;
  /** Events a group keeps for members that join late or resume. */
  readonly groupBufferMax?: number;
}

/** The Watch handler of a router, counting the watches it proxies. */
export class WatchProxies {
  private open = 0;
  private readonly groups: WatchGroups | undefined;
  private readonly backlogMax: number;

  constructor(
    private readonly deps: WatchDeps,
    options: WatchOptions = {},
  ) {
    this.groups = (options.coalesce ?? true) ? new WatchGroups(deps, options.groupBufferMax) : undefined;
    this.backlogMax = options.memberBacklogMax ?? WATCH_MEMBER_BACKLOG_MAX;
  }

  serve = (call: WatchCall): void => {
    if (this.open >= WATCHES_MAX) {
      call.emit(
        'error',
        toServiceError(new FencerError('TOO_MANY_REQUESTS', `this router proxies ${WATCHES_MAX} watches already; retry elsewhere`)),
      );
      return;
    }
    this.count(+1);
    const watch = new ClientWatch(this.deps, this.groups, this.backlogMax, call, () => this.count(-1));
    call.on('cancelled', () => watch.stop());
    call.on('close', () => watch.stop());
    watch.begin();
  };

  private count(delta: number): void {
    this.open += delta;
    this.deps.metrics.watches.set(this.open);
  }
}

/** One client's watch: fed by its own upstream stream, or by a group's. */
class ClientWatch implements GroupMember {
  private live = true;
  private readonly target: WatchTarget;
  private readonly cursor: WatchCursor;
  private upstream: UpstreamWatch | undefined;
  private group: WatchGroup | undefined;

  constructor(
    private readonly deps: WatchDeps,
    private readonly groups: WatchGroups | undefined,
    private readonly backlogMax: number,
    private readonly call: WatchCall,
    private readonly ended: () => void,
  ) {
    const req = call.request;
    this.target = { name: req.name, prefix: req.prefix };
    this.cursor = new WatchCursor(req.sinceRevision);
  }

  /** Joins a group that reaches back to the client's revision, else opens its own stream. */
  begin(): void {
    try {
      namespaceOfCall('watch', this.target as unknown as Record<string, unknown>);
    } catch (err) {
      return this.stop(toClientError(err, this.deps.logger, 'watch'));
    }
    if (this.tryJoin(this.cursor.revision)) return;
    this.upstream = new UpstreamWatch(this.deps, this.target, {
      since: () => this.cursor.resumeFrom(),
      event: (ev) => this.ownEvent(ev),
      ended: (err) => this.stop(err),
    });
    this.upstream.start();
  }

  /** An event of a group: written at once; a reader too far behind is cut rather than waited for. */
  deliver(ev: lockservice.WatchEvent): void {
    if (!this.live) return;
    this.call.write(ev);
    if (this.call.writableLength > this.backlogMax) {
      this.deps.metrics.slowWatchers.inc();
      this.stop(
        toServiceError(
          new FencerError(
            'SLOW_WATCHER',
            'this watcher fell too far behind the others; resume with since_revision = the last revision seen',
          ),
        ),
      );
    }
  }

  /** Ends the watch once: its stream or group left, and the client gets `err` or the stream's end. */
  stop(err?: Partial<ServiceError>): void {
    if (!this.live) return;
    this.live = false;
    this.ended();
    this.upstream?.stop();
    this.upstream = undefined;
    this.group?.leave(this);
    this.group = undefined;
    if (err) this.call.emit('error', err);
    else this.call.end();
  }

  /** An event of its own stream: passed on with backpressure, and a PROGRESS is the moment to join a group. */
  private ownEvent(ev: lockservice.WatchEvent): void {
    if (!this.cursor.admit(ev)) return;
    if (!this.call.write(ev)) {
      this.upstream?.pause();
      this.call.once('drain', () => this.upstream?.resume());
    }
    if (ev.type === lockservice.WatchEventType.WATCH_EVENT_TYPE_PROGRESS && this.tryJoin(ev.revision)) {
      const own = this.upstream;
      this.upstream = undefined;
      own?.stop();
    }
  }

  private tryJoin(revision: number): boolean {
    if (!this.groups || !this.live) return false;
    this.group = this.groups.join(this.target, revision, this);
    return this.group !== undefined;
  }
}

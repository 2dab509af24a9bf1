/**
 * Watch fan-out from the apply stream. Every node (leader or follower) feeds
 * it from its own state machine, so a watcher can be served anywhere.
 *
 * History: a bounded ring of recent events. `floorRevision` is the highest
 * revision whose events may be missing (evicted from the ring, or before the
 * snapshot this node restored from); a resume from since_revision below it
 * is COMPACTED. Events with revision > floorRevision are all in the ring, so
 * a resume above it skips nothing and repeats nothing.
 *
 * A tenant move (docs/decisions/0019-the-move-worker.md): when a namespace
 * freezes, its watchers get a last PROGRESS at the freeze's revision and
 * end with NAMESPACE_MOVING, so the revision they resume from is at least
 * the namespace's last change. The cell it moves to notes the import
 * (`imported`): a resume from at least that last change is served from the
 * import point even below this node's floor, since the namespace had no
 * events between the two and every event of it here is in the ring.
 */
import { assert } from '@fencer/base';
import type { LockEvent, LockState } from '@fencer/lock-fsm';

export interface WatchFilter {
  readonly name: string;
  readonly prefix: boolean;
}

export type HubEvent =
  | { readonly type: 'event'; readonly event: LockEvent }
  | { readonly type: 'snapshot'; readonly revision: number; readonly lock: LockState }
  | { readonly type: 'progress'; readonly revision: number };

/** Where a watcher's events go (a gRPC server stream in production). */
export interface WatchSink {
  /** Returns how many events are buffered and not yet sent after this write. */
  write(event: HubEvent): number;
  end(reason?: 'slow' | 'shutdown' | 'moving'): void;
}

/** Where an imported namespace's history continues on this node. */
interface ImportPoint {
  /** The namespace's last change on its old cell (its freeze): no event of it lies between this and `revision`. */
  readonly namespaceRevision: number;
  /** The revision of the import entry here. */
  readonly revision: number;
}

interface Watcher {
  readonly filter: WatchFilter;
  readonly sink: WatchSink;
  lastSentMonoMs: number;
  lastRevision: number;
  /**
   * The resume revision: nothing at or below it is sent. A replica that is
   * behind it (paused, restarted, lagging) would otherwise deliver again, as
   * it catches up, events the watcher saw elsewhere, and PROGRESS below it.
   */
  readonly sinceRevision: number;
}

export interface WatchHubOptions {
  /** Events kept for resuming. */
  readonly historyMax: number;
  /** A watcher with more events than this buffered is too slow: ended with RESOURCE_EXHAUSTED. */
  readonly watcherBufferMax: number;
  /** Most watchers at once on this node. */
  readonly watchersMax: number;
  /** An idle watcher gets a PROGRESS event at least this often. */
  readonly progressIntervalMs: number;
}

export function matches(filter: WatchFilter, name: string): boolean {
  return filter.prefix ? name.startsWith(filter.name) : name === filter.name;
}

export class WatchHub {
  private ring: (LockEvent | undefined)[];
  private head = 0;
  private count = 0;
  private floor = 0;
  private revision = 0;
  /** Latest monotonic time seen (tick or subscribe): events sent between ticks count as activity at it. */
  private lastNowMonoMs = 0;
  private readonly watchers = new Set<Watcher>();
  /** Imports applied since this node's history began, by namespace (at most one per namespace, the latest). */
  private readonly imports = new Map<string, ImportPoint>();

  constructor(private readonly opts: WatchHubOptions) {
    assert(opts.historyMax > 0 && opts.watcherBufferMax > 0, 'watch limits are positive');
    this.ring = new Array<LockEvent | undefined>(opts.historyMax);
  }

  get floorRevision(): number {
    return this.floor;
  }

  get currentRevision(): number {
    return this.revision;
  }

  get watcherCount(): number {
    return this.watchers.size;
  }

  /** The state machine was replaced by a snapshot at `revision`: history before it is gone. */
  reset(revision: number): void {
    // Watchers would silently miss the events the snapshot replaced: end them so they resume
    // (from their last revision: COMPACTED here, so elsewhere or after a resync).
    for (const w of this.watchers) w.sink.end('slow');
    this.watchers.clear();
    this.ring = new Array<LockEvent | undefined>(this.opts.historyMax);
    this.head = 0;
    this.count = 0;
    this.floor = revision;
    this.revision = revision;
    this.imports.clear();
  }

  /** An import of `namespace` applied at `revision`; its last change on its old cell was `namespaceRevision`. */
  imported(namespace: string, namespaceRevision: number, revision: number): void {
    assert(namespaceRevision < revision, 'an import continues above its export');
    this.imports.delete(namespace);
    this.imports.set(namespace, { namespaceRevision, revision });
  }

  /**
   * The namespace froze at `revision`: each of its watchers gets a PROGRESS
   * there (it has every event of the namespace) and ends with 'moving'.
   * `inNamespace` says whether a filter lies in the namespace.
   */
  endNamespace(revision: number, inNamespace: (filter: WatchFilter) => boolean): void {
    for (const w of [...this.watchers]) {
      if (!inNamespace(w.filter)) continue;
      this.watchers.delete(w);
      if (revision > w.sinceRevision) w.sink.write({ type: 'progress', revision });
      w.sink.end('moving');
    }
  }

  /** Events of one applied entry (possibly none), in order; `revision` is that entry's. */
  publish(revision: number, events: readonly LockEvent[]): void {
    assert(revision >= this.revision, `watch revisions go forward (${this.revision} → ${revision})`);
    this.revision = revision;
    for (const event of events) {
      assert(event.revision === revision, 'an event carries its entry revision');
      this.remember(event);
      for (const w of this.watchers)
        if (event.revision > w.sinceRevision && matches(w.filter, event.name)) this.send(w, { type: 'event', event }, this.lastNowMonoMs);
    }
  }

  /**
   * Starts a watch. since = 0: one SNAPSHOT per live lock (from `snapshotLocks`),
   * then PROGRESS, then live events. since > 0: every retained event above it,
   * then live events. Returns false (COMPACTED) when history no longer covers since.
   */
  subscribe(
    filter: WatchFilter,
    sinceRevision: number,
    sink: WatchSink,
    nowMonoMs: number,
    snapshotLocks: () => Iterable<LockState>,
    namespace?: string,
  ): 'ok' | 'compacted' | 'full' {
    if (this.watchers.size >= this.opts.watchersMax) return 'full';
    this.lastNowMonoMs = Math.max(this.lastNowMonoMs, nowMonoMs);
    const w: Watcher = { filter, sink, lastSentMonoMs: nowMonoMs, lastRevision: sinceRevision, sinceRevision };
    if (sinceRevision === 0) {
      for (const lock of snapshotLocks()) this.send(w, { type: 'snapshot', revision: this.revision, lock }, nowMonoMs);
      this.send(w, { type: 'progress', revision: this.revision }, nowMonoMs);
    } else {
      if (sinceRevision < this.floor && !this.continuesImport(namespace, sinceRevision)) return 'compacted';
      for (let i = 0; i < this.count; i++) {
        const event = this.ring[(this.head + i) % this.ring.length]!;
        if (event.revision > sinceRevision && matches(filter, event.name)) this.send(w, { type: 'event', event }, nowMonoMs);
      }
    }
    this.watchers.add(w);
    return 'ok';
  }

  /** A resume from `sinceRevision` of `namespace` is whole here although below the floor: it continues an import. */
  private continuesImport(namespace: string | undefined, sinceRevision: number): boolean {
    const point = namespace === undefined ? undefined : this.imports.get(namespace);
    return point !== undefined && sinceRevision >= point.namespaceRevision && this.floor <= point.revision;
  }

  unsubscribe(sink: WatchSink): void {
    for (const w of this.watchers) if (w.sink === sink) this.watchers.delete(w);
  }

  /** PROGRESS to every watcher idle for progressIntervalMs. */
  tick(nowMonoMs: number): void {
    this.lastNowMonoMs = Math.max(this.lastNowMonoMs, nowMonoMs);
    for (const w of this.watchers) {
      if (nowMonoMs - w.lastSentMonoMs >= this.opts.progressIntervalMs && this.revision >= w.sinceRevision)
        this.send(w, { type: 'progress', revision: this.revision }, nowMonoMs);
    }
  }

  /** Ends every watcher (node shutting down). */
  close(): void {
    for (const w of this.watchers) w.sink.end('shutdown');
    this.watchers.clear();
  }

  private remember(event: LockEvent): void {
    if (this.count === this.ring.length) {
      const evicted = this.ring[this.head]!;
      this.floor = Math.max(this.floor, evicted.revision);
      this.ring[this.head] = event;
      this.head = (this.head + 1) % this.ring.length;
    } else {
      this.ring[(this.head + this.count) % this.ring.length] = event;
      this.count++;
    }
  }

  private send(w: Watcher, event: HubEvent, nowMonoMs: number): void {
    const buffered = w.sink.write(event);
    w.lastSentMonoMs = Math.max(w.lastSentMonoMs, nowMonoMs);
    if (event.type !== 'snapshot') w.lastRevision = event.type === 'event' ? event.event.revision : event.revision;
    if (buffered > this.opts.watcherBufferMax) {
      this.watchers.delete(w);
      w.sink.end('slow');
    }
  }
}

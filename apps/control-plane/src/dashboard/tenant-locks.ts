/**
 * A tenant's live locks, kept current from Watch on the cell that owns it:
 * one prefix watch ("/ls/<namespace>/") per watched tenant, shared by every
 * stream that shows it, through the TypeScript client (which resumes after
 * breaks without gaps or repeats, and resyncs after COMPACTED). The route
 * is checked every `routeCheckMs`: when a move switches the tenant to
 * another cell, the watch starts over there from a fresh snapshot, since
 * revisions do not carry across cells' watches.
 */
import { FencerClient, type LockInfo, type WatchEventInfo } from '@fencer/client';
import type { LockRow, LocksEvent } from '@fencer/dashboard-ui';
import type { CellDirectory } from '../cells.js';
import { dashboardLocksMax, dashboardWatchRetryMs } from '../limits.js';
import type { MetaStore } from '../meta-group.js';

export type LocksListener = (event: LocksEvent) => void;

/** What the watch needs from a lock-service client; tests may pass another. */
export interface WatchClient {
  watch(prefix: string, options: { signal: AbortSignal }): AsyncIterable<WatchEventInfo>;
  close(): Promise<void>;
}

export type WatchClientFactory = (endpoints: readonly string[]) => WatchClient;

export const grpcWatchClient: WatchClientFactory = (endpoints) =>
  new FencerClient({ endpoints, clientId: 'fencer-control-plane/dashboard' });

function lockRow(lock: LockInfo): LockRow {
  return {
    name: lock.name,
    holders: lock.holders.map((h) => ({ sessionId: h.sessionId, clientId: h.clientId, token: h.token, mode: h.mode })),
    waiters: lock.waiters.map((w) => ({ sessionId: w.sessionId, clientId: w.clientId, mode: w.mode })),
  };
}

export interface TenantLocksDeps {
  readonly meta: MetaStore;
  readonly cells: CellDirectory;
  readonly newClient: WatchClientFactory;
  readonly routeCheckMs: number;
}

/** One tenant's watch: started by the first listener, stopped with the last. */
export class TenantLocks {
  private readonly listeners = new Set<LocksListener>();
  private readonly locks = new Map<string, LockRow>();
  private cell: string | null = null;
  private revision = 0;
  private problem: string | undefined;
  private abort: AbortController | undefined;
  private routeTimer: NodeJS.Timeout | undefined;
  private emitQueued = false;

  constructor(
    readonly namespace: string,
    private readonly deps: TenantLocksDeps,
  ) {}

  get listenerCount(): number {
    return this.listeners.size;
  }

  add(listener: LocksListener): void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) this.start();
    else listener(this.event());
  }

  /** Returns true when this was the last listener (the watch has stopped). */
  remove(listener: LocksListener): boolean {
    this.listeners.delete(listener);
    if (this.listeners.size > 0) return false;
    this.stop();
    return true;
  }

  private start(): void {
    this.followRoute();
    this.routeTimer = setInterval(() => this.followRoute(), this.deps.routeCheckMs);
    this.routeTimer.unref();
  }

  stop(): void {
    clearInterval(this.routeTimer);
    this.abort?.abort();
    this.abort = undefined;
  }

  /** The tenant's cell as applied here; a different one than watched restarts the watch there. */
  private followRoute(): void {
    const cell = this.deps.meta.state.tenant(this.namespace)?.cell ?? null;
    if (cell === this.cell && this.abort !== undefined) return;
    this.abort?.abort();
    this.cell = cell;
    this.locks.clear();
    this.revision = 0;
    this.problem = cell === null ? `no tenant "${this.namespace}"` : undefined;
    this.abort = new AbortController();
    if (cell !== null) void this.watchLoop(cell, this.abort.signal);
    this.queueEmit();
  }

  private endpointsOf(cell: string): string[] {
    return (
      this.deps.cells
        .status()
        .find((c) => c.id === cell)
        ?.replicas.map((r) => r.grpc) ?? []
    );
  }

  /** Watches until aborted; a watch that fails (the client gave up its retries) is started again after a pause. */
  private async watchLoop(cell: string, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const client = this.deps.newClient(this.endpointsOf(cell));
      try {
        for await (const ev of client.watch(`/ls/${this.namespace}/`, { signal })) this.apply(ev);
      } catch (e) {
        if (signal.aborted) break;
        this.problem = `the watch on cell ${cell} broke (${(e as Error).message}); retrying`;
        this.queueEmit();
      } finally {
        await client.close().catch(() => undefined);
      }
      await new Promise((resolve) => setTimeout(resolve, dashboardWatchRetryMs).unref());
    }
  }

  private apply(ev: WatchEventInfo): void {
    this.problem = undefined;
    if (ev.type === 'resync') this.locks.clear();
    else if (ev.lock !== undefined) {
      const free = ev.lock.holders.length === 0 && ev.lock.waiters.length === 0;
      if (free) this.locks.delete(ev.lock.name);
      else if (this.locks.has(ev.lock.name) || this.locks.size < dashboardLocksMax) this.locks.set(ev.lock.name, lockRow(ev.lock));
      else this.problem = `showing the first ${dashboardLocksMax} locks only`;
    }
    this.revision = Math.max(this.revision, ev.revision);
    this.queueEmit();
  }

  /** One event per turn of the loop: a watch's snapshot arrives as many events at once. */
  private queueEmit(): void {
    if (this.emitQueued) return;
    this.emitQueued = true;
    setImmediate(() => {
      this.emitQueued = false;
      const event = this.event();
      for (const l of this.listeners) l(event);
    });
  }

  private event(): LocksEvent {
    return {
      namespace: this.namespace,
      cell: this.cell,
      revision: this.revision,
      locks: [...this.locks.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
      ...(this.problem !== undefined ? { problem: this.problem } : {}),
    };
  }
}

/** Every tenant watched now, by namespace. */
export class TenantLocksHub {
  private readonly watched = new Map<string, TenantLocks>();

  constructor(private readonly deps: TenantLocksDeps) {}

  get size(): number {
    return this.watched.size;
  }

  has(namespace: string): boolean {
    return this.watched.has(namespace);
  }

  subscribe(namespace: string, listener: LocksListener): () => void {
    let t = this.watched.get(namespace);
    if (t === undefined) {
      t = new TenantLocks(namespace, this.deps);
      this.watched.set(namespace, t);
    }
    t.add(listener);
    const watch = t;
    return () => {
      if (watch.remove(listener)) this.watched.delete(namespace);
    };
  }

  close(): void {
    for (const t of this.watched.values()) t.stop();
    this.watched.clear();
  }
}

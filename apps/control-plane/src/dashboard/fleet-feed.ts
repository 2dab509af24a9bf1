/**
 * The `fleet` event, rebuilt every `intervalMs` while at least one stream is
 * open: the meta group's state after a ReadIndex barrier (`meta.read()`, so
 * a follower shows what the leader has committed, never a stale view of
 * its own), the cells as last polled, and per-namespace counts from the
 * cells' admin ListNamespaces (refreshed in the background, one round at a
 * time, so a slow cell delays its counts and not the view).
 */
import type { FleetEvent, StreamProblem, Usage } from '@fencer/dashboard-ui';
import type { CellDirectory, CellView } from '../cells.js';
import { dashboardReadTimeoutMs } from '../limits.js';
import type { MetaStore } from '../meta-group.js';
import { fleetEvent } from './fleet-view.js';

export interface FleetListener {
  onFleet(event: FleetEvent): void;
  onProblem(problem: StreamProblem): void;
}

export interface FleetFeedDeps {
  readonly meta: MetaStore;
  readonly cells: CellDirectory;
  readonly instanceId: string;
  readonly wallMs: () => number;
  readonly intervalMs: number;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export class FleetFeed {
  private readonly listeners = new Set<FleetListener>();
  private readonly usage = new Map<string, Usage>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private usageRound = false;

  constructor(private readonly deps: FleetFeedDeps) {}

  get listenerCount(): number {
    return this.listeners.size;
  }

  /** The listener gets an event at once (after a barrier), then one per interval. */
  subscribe(listener: FleetListener): () => void {
    this.listeners.add(listener);
    if (this.timer === undefined) {
      this.timer = setInterval(() => void this.tick(), this.deps.intervalMs);
      this.timer.unref();
    }
    void this.tick(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.stop();
    this.listeners.clear();
  }

  /** One read and one event to every listener; `only` is a new listener whose first event should not wait for the round in progress. */
  private async tick(only?: FleetListener): Promise<void> {
    if (this.ticking && only === undefined) return;
    if (only === undefined) this.ticking = true;
    const targets = only ? [only] : [...this.listeners];
    try {
      const state = await withTimeout(this.deps.meta.read(), dashboardReadTimeoutMs, 'a read of the meta group');
      this.refreshUsage();
      const cells = this.deps.cells.status();
      this.pollSoonerInTrouble(cells);
      const event = fleetEvent({
        state,
        cells,
        usage: this.usage,
        instance: { id: this.deps.instanceId, leader: this.deps.meta.isLeader },
        atMs: this.deps.wallMs(),
      });
      for (const l of targets) if (this.listeners.has(l)) l.onFleet(event);
    } catch (e) {
      const problem = { title: 'meta group unavailable', detail: `the views are as last sent: ${(e as Error).message}` };
      for (const l of targets) if (this.listeners.has(l)) l.onProblem(problem);
    } finally {
      if (only === undefined) this.ticking = false;
    }
  }

  /**
   * While a cell has no leader or a replica does not answer, its Status is polled at this feed's pace too, so
   * the page shows the new leader a poll interval sooner; a healthy fleet is polled at the regular interval only.
   */
  private pollSoonerInTrouble(cells: readonly CellView[]): void {
    const trouble = cells.some((c) => c.leader === null || c.replicas.some((r) => r.role === 'unreachable' || r.role === 'candidate'));
    if (trouble) void this.deps.cells.poll?.();
  }

  /** Counts per namespace from each cell's leader; a cell that does not answer keeps its last counts. */
  private refreshUsage(): void {
    if (this.usageRound) return;
    this.usageRound = true;
    void Promise.allSettled(
      this.deps.cells.cellIds().map(async (cell) => {
        const entries = await this.deps.cells.listNamespaces(cell);
        for (const key of [...this.usage.keys()]) if (key.startsWith(`${cell}/`)) this.usage.delete(key);
        // A namespace moved away leaves a tombstone on its old cell: its counts are the new cell's to report.
        for (const e of entries)
          if (e.state !== 'moved') this.usage.set(`${cell}/${e.namespace}`, { sessions: e.sessions, locks: e.locks, waiters: e.waiters });
      }),
    ).finally(() => {
      this.usageRound = false;
    });
  }
}

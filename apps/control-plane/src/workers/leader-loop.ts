/**
 * Background work that only the meta leader does: run tenant moves, keep
 * every cell's owned namespaces equal to the routing table, upload
 * snapshots. Each kind is a `LeaderTask`; the loop runs every task's pass
 * while this instance leads, and stops them when it no longer does.
 *
 * Why only the leader: a pass reads the journal after a ReadIndex barrier
 * and writes its progress back through the meta group, so two instances
 * working at once would only race each other's proposals. Every step a pass
 * takes is idempotent by its record's id (a move id, a snapshot id), so a
 * new leader that repeats the last step of a deposed one changes nothing:
 * "on becoming leader, resume every unfinished record from its journaled
 * state" is simply the first pass.
 *
 * Ordering, per task:
 * - a pass starts at once when this instance becomes leader, then every
 *   `intervalMs` after the previous pass ended (never two passes of one task
 *   at a time, so a slow cell call cannot pile passes up);
 * - `wake(name)` starts the next pass as soon as the current one ends
 *   (a POST that journaled new work does not wait out the interval);
 * - on losing leadership the pass's AbortSignal fires; a pass checks it
 *   between steps and stops. A step already sent to a cell may still land:
 *   that is why steps are idempotent.
 * A pass that throws is logged and counted; the next pass retries.
 */
import type { Logger } from 'pino';

/** One kind of leader-only work. */
export interface LeaderTask {
  readonly name: string;
  /** Time from the end of one pass to the start of the next, when nothing wakes it. */
  readonly intervalMs: number;
  /** One pass over the journal. Resolves when done; rejects on a failure the next pass retries. */
  runPass(signal: AbortSignal): Promise<void>;
}

/** What the loop needs of the meta group: whether this instance leads now. */
export interface Leadership {
  readonly isLeader: boolean;
}

export interface LeaderLoopMetrics {
  passEnded(task: string, outcome: 'ok' | 'failed' | 'aborted', seconds: number): void;
}

/** How often the loop looks whether this instance gained or lost leadership. */
export const LEADERSHIP_POLL_MS = 100;

interface Running {
  readonly task: LeaderTask;
  abort: AbortController;
  timer: NodeJS.Timeout | undefined;
  passing: boolean;
  wakeAfterPass: boolean;
}

export class LeaderLoop {
  private readonly running = new Map<string, Running>();
  private leading = false;
  private readonly poll: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly leadership: Leadership,
    tasks: readonly LeaderTask[],
    private readonly logger: Logger,
    private readonly metrics?: LeaderLoopMetrics,
  ) {
    for (const task of tasks) {
      if (this.running.has(task.name)) throw new Error(`two leader tasks named ${task.name}`);
      this.running.set(task.name, { task, abort: new AbortController(), timer: undefined, passing: false, wakeAfterPass: false });
    }
    this.poll = setInterval(() => this.followLeadership(), LEADERSHIP_POLL_MS);
    this.followLeadership();
  }

  /** Starts `name`'s next pass now, or as soon as its current one ends. A no-op on a follower. */
  wake(name: string): void {
    const r = this.running.get(name);
    if (!r || !this.leading || this.closed) return;
    if (r.passing) {
      r.wakeAfterPass = true;
      return;
    }
    this.schedule(r, 0);
  }

  close(): void {
    this.closed = true;
    clearInterval(this.poll);
    this.stopAll();
  }

  private followLeadership(): void {
    const leads = this.leadership.isLeader && !this.closed;
    if (leads === this.leading) return;
    this.leading = leads;
    this.logger.info({ leading: leads, tasks: [...this.running.keys()] }, leads ? 'leader tasks start' : 'leader tasks stop');
    if (leads) for (const r of this.running.values()) this.schedule(r, 0);
    else this.stopAll();
  }

  private stopAll(): void {
    for (const r of this.running.values()) {
      clearTimeout(r.timer);
      r.timer = undefined;
      r.wakeAfterPass = false;
      r.abort.abort();
    }
  }

  private schedule(r: Running, delayMs: number): void {
    clearTimeout(r.timer);
    r.timer = setTimeout(() => void this.pass(r), delayMs);
  }

  private async pass(r: Running): Promise<void> {
    r.timer = undefined;
    if (!this.leading || r.passing) return;
    r.passing = true;
    r.abort = new AbortController();
    const signal = r.abort.signal;
    const startedMs = performance.now();
    let outcome: 'ok' | 'failed' | 'aborted' = 'ok';
    try {
      await r.task.runPass(signal);
      if (signal.aborted) outcome = 'aborted';
    } catch (err) {
      outcome = signal.aborted ? 'aborted' : 'failed';
      if (outcome === 'failed') this.logger.warn({ task: r.task.name, err: (err as Error).message }, 'leader task pass failed; retrying');
    } finally {
      r.passing = false;
    }
    this.metrics?.passEnded(r.task.name, outcome, (performance.now() - startedMs) / 1000);
    if (!this.leading || this.closed) return;
    const again = r.wakeAfterPass;
    r.wakeAfterPass = false;
    this.schedule(r, again ? 0 : r.task.intervalMs);
  }
}

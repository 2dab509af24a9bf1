/**
 * What the rolling-upgrade test watches while it restarts a fleet: clients
 * taking locks through the SDK (LockLoad), each cell's leaders by term
 * (LeaderWatch), and one process's SIGTERM, restart and readiness
 * (restartOne).
 */
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FencerClient } from '@fencer/client';
import type { TestFleet } from '@fencer/fleet/testing';

/** How often LeaderWatch asks every replica for its status. */
const WATCH_INTERVAL_MS = 100;
/** One Status call's deadline. */
const STATUS_TIMEOUT_MS = 500;
/** A load worker gives up after this many locks (the test stops it long before). */
const LOAD_ITERATIONS_MAX = 100_000;
/** How long an acquire waits in the queue for its lock. */
const ACQUIRE_WAIT_MS = 30_000;

/** Polls `probe` every 100 ms until it yields a value, or fails after `timeoutMs` naming `what`. */
export async function until<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const endMs = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > endMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** True when GET `url` answers 200 within a second. */
export async function answersOk(url: string): Promise<true | undefined> {
  const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
  return res.ok ? true : undefined;
}

/**
 * Clients taking exclusive locks in a loop with withLock, as an application
 * would. A call that throws has failed beyond the SDK's own retries; every
 * grant's token is recorded per lock name while the lock is held, so the
 * tokens of one name are in grant order.
 */
export class LockLoad {
  grants = 0;
  readonly failures: string[] = [];
  readonly tokens = new Map<string, number[]>();
  /** Jeopardy and expiry events of the clients' sessions, with their wall-clock time. */
  readonly sessionEvents: { event: string; namespace: string; atMs: number }[] = [];
  private readonly events = new EventEmitter();
  private stopped = false;
  private workers: Promise<void>[] = [];

  constructor(
    private readonly clients: readonly FencerClient[],
    private readonly names: readonly string[],
  ) {
    for (const c of clients) {
      for (const event of ['jeopardy', 'expired'] as const)
        c.on(event, (s) => this.sessionEvents.push({ event, namespace: s.namespace, atMs: Date.now() }));
    }
  }

  /**
   * `workersPerClient` loops per client. A session holds one wait per lock (the cell refuses a second waiter of the
   * same session), so worker w of a client takes only the names whose index is w modulo the workers: clients contend
   * for every lock, a client's own workers never for the same one.
   */
  start(workersPerClient: number): void {
    this.workers = this.clients.flatMap((client) =>
      Array.from({ length: workersPerClient }, (_, w) =>
        this.work(
          client,
          this.names.filter((_, i) => i % workersPerClient === w),
        ),
      ),
    );
  }

  private async work(client: FencerClient, names: readonly string[]): Promise<void> {
    for (let i = 0; !this.stopped && i < LOAD_ITERATIONS_MAX; i++) {
      const name = names[i % names.length]!;
      try {
        await client.withLock(name, { waitMs: ACQUIRE_WAIT_MS }, (lock) => {
          const seen = this.tokens.get(name) ?? [];
          seen.push(lock.token);
          this.tokens.set(name, seen);
        });
        this.grants++;
        this.events.emit('grant');
      } catch (e) {
        this.failures.push(`${name}: ${e instanceof Error ? `${e.name} ${(e as { code?: string }).code ?? ''} ${e.message}` : String(e)}`);
      }
    }
  }

  /** Resolves once `count` more grants than now have been acknowledged. */
  progressed(count: number, timeoutMs: number): Promise<void> {
    const target = this.grants + count;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.events.off('grant', onGrant);
        reject(new Error(`the load did not make ${count} more grants within ${timeoutMs} ms (${this.grants} of ${target})`));
      }, timeoutMs);
      const onGrant = (): void => {
        if (this.grants < target) return;
        clearTimeout(timer);
        this.events.off('grant', onGrant);
        resolve();
      };
      this.events.on('grant', onGrant);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.workers);
  }

  /** Lock names whose tokens did not strictly grow, with their tokens. */
  tokensNotGrowing(): string[] {
    return [...this.tokens].filter(([, t]) => t.some((v, i) => i > 0 && v <= t[i - 1]!)).map(([n, t]) => `${n}: ${t.join(',')}`);
  }
}

/**
 * Every replica's view of who leads, sampled every 100 ms: per cell, the
 * leader each term had (a replica that leads, or a follower naming its
 * leader) and the highest term any replica reached, elections without a
 * winner included.
 */
export class LeaderWatch {
  /** cell id -> term -> the leaders named for it (more than one would break Raft's election safety). */
  readonly leaders = new Map<string, Map<number, Set<string>>>();
  readonly maxTerm = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(private readonly fleet: TestFleet) {}

  start(): void {
    this.timer = setInterval(() => void this.sample(), WATCH_INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const replicas = this.fleet.plan.flatMap((c) => c.replicas.map((r) => ({ cell: c.id, id: r.id })));
      const statuses = await Promise.all(
        replicas.map(async (r) => ({ ...r, s: this.fleet.alive(r.id) ? await this.fleet.statusOf(r.id, STATUS_TIMEOUT_MS) : undefined })),
      );
      for (const { cell, s } of statuses) {
        if (!s) continue;
        this.maxTerm.set(cell, Math.max(this.maxTerm.get(cell) ?? 0, s.term));
        const leader = s.role === 'leader' ? s.nodeId : s.leaderId;
        if (!leader) continue;
        const terms = this.leaders.get(cell) ?? new Map<number, Set<string>>();
        terms.set(s.term, (terms.get(s.term) ?? new Set()).add(leader));
        this.leaders.set(cell, terms);
      }
    } finally {
      this.busy = false;
    }
  }

  /** The leaders of `cell` in term order, one entry per change of leader (a term re-electing the same one is no change). */
  leaderSequence(cell: string): string[] {
    const terms = [...(this.leaders.get(cell) ?? new Map<number, Set<string>>())].sort(([a], [b]) => a - b);
    const sequence: string[] = [];
    for (const [, ids] of terms) for (const id of ids) if (sequence.at(-1) !== id) sequence.push(id);
    return sequence;
  }

  /** Terms of `cell` in which more than one leader was named. */
  termsWithTwoLeaders(cell: string): number[] {
    return [...(this.leaders.get(cell) ?? new Map<number, Set<string>>())].filter(([, ids]) => ids.size > 1).map(([t]) => t);
  }
}

/** The last `msg` line of a pino log file with its fields, or undefined. */
export function lastLogLine(file: string, msg: string): Record<string, unknown> | undefined {
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`));
  const last = lines.at(-1);
  return last === undefined ? undefined : (JSON.parse(last) as Record<string, unknown>);
}

/** Where the test fleet writes one process's log (tools/fleet appends across restarts). */
export function logOf(fleet: TestFleet, id: string): string {
  return path.join(fleet.dataDir, 'logs', `${id}.log`);
}

/**
 * SIGTERM to one process, its exit awaited (its code returned), then the
 * same process started again from its plan and awaited until `ready`.
 */
export async function restartOne(
  fleet: TestFleet,
  id: string,
  ready: () => Promise<true | undefined>,
  timeoutMs: number,
): Promise<number | null> {
  const child = fleet.children.get(id)!;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  fleet.signal(id, 'SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([
    exited,
    new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`${id} did not exit within ${timeoutMs} ms of SIGTERM`)), timeoutMs)),
    ),
  ]).finally(() => clearTimeout(timer));
  fleet.restart(id);
  await until(ready, timeoutMs, `${id} ready again`);
  return code;
}

/**
 * Clients of the moves simulation: the lock workload (lock-workload.ts) in
 * two namespaces, one of which moves back and forth between the cells. Each
 * client reaches a namespace's cell through its own copy of the routing
 * table, read from a meta member's applied state (a router's view: possibly
 * stale), and refreshes it when a cell answers NAMESPACE_NOT_HERE. A write
 * that meets a frozen namespace (NAMESPACE_MOVING) or gets no answer is
 * retried as the same request, request id included; sessions are kept alive
 * by heartbeats to the same cell. Now and then a client dies, leaving its
 * session for the leader to expire.
 */
import type { FencerError, Result } from '@fencer/base';
import type { HeartbeatAnswer } from '@fencer/cell';
import { type LockClient, type LockWrite, lockAnswered, lockClientDied, newLockClient, nextLockOp } from './lock-workload.js';
import type { GroupName, Member, MovesWorld } from './moves-world.js';
import { Tag } from './tags.js';

/** Between a client's calls, in ms [min, max]. */
const THINK_MS: readonly [number, number] = [10, 60];
/** Between a session's heartbeats. */
const HEARTBEAT_EVERY_MS = 400;
/** A call unanswered this long past its wait is given up (and retried as is). */
const CALL_SLACK_MS = 1_500;
/** Chance, per step, that a client with a session dies: the leader, wherever the session moved, must expire it. */
const DIE_P = 0.01;

/** A session id starts with its namespace and a colon. */
function namespaceOf(w: LockWrite): string {
  return w.method === 'openSession' ? w.request.namespace : w.request.sessionId.slice(0, w.request.sessionId.indexOf(':'));
}

export class MoveClients {
  private readonly clients: LockClient[];
  /** Each client's routing table: namespace → cell. */
  private readonly routes: Map<string, string>[];
  running = true;
  /** Sessions whose client died: each must be expired in time, on whichever cell holds it. */
  readonly abandoned: { readonly id: string; readonly atUs: number; readonly ttlMs: number }[] = [];
  writes = 0;
  movingAnswers = 0;
  notHereAnswers = 0;

  constructor(
    private readonly w: MovesWorld,
    count: number,
    private readonly routeNow: (namespace: string) => string | undefined,
  ) {
    this.clients = Array.from({ length: count }, (_, i) => newLockClient(i));
    this.routes = this.clients.map(() => new Map());
  }

  start(): void {
    for (const c of this.clients) {
      this.w.later(this.w.random.range(...THINK_MS), Tag.client | (c.id << 8), () => this.step(c));
      this.w.later(HEARTBEAT_EVERY_MS, Tag.client | (c.id << 8), () => this.heartbeat(c));
    }
  }

  private cellFor(c: LockClient, namespace: string, refresh: boolean): string | undefined {
    const table = this.routes[c.id] as Map<string, string>;
    if (refresh || !table.has(namespace)) {
      const cell = this.routeNow(namespace);
      if (cell !== undefined) table.set(namespace, cell);
    }
    return table.get(namespace);
  }

  /** A replica of the cell: mostly the one that believes it leads, else any (followers forward). */
  private memberOf(cell: string): Member {
    const leader = this.w.leaderOf(cell as GroupName);
    if (leader !== undefined && this.w.random.chance(0.8)) return leader;
    return this.w.random.pick(this.w.groupOf(cell as GroupName));
  }

  private again(c: LockClient, ms: number): void {
    if (this.running) this.w.later(ms, Tag.client | (c.id << 8), () => this.step(c));
  }

  private step(c: LockClient): void {
    if (!this.running) return;
    if (c.session !== null && c.pending === null && this.w.random.chance(DIE_P)) {
      this.abandoned.push({ id: c.session.id, atUs: this.w.sched.now, ttlMs: c.session.ttlMs });
      lockClientDied(c);
    }
    const op = nextLockOp(c, this.w.random, 0);
    if (op.kind !== 'write') return this.again(c, 10);
    const write = op.write;
    const namespace = namespaceOf(write);
    const cell = this.cellFor(c, namespace, false);
    if (cell === undefined) return this.again(c, 50);
    this.writes++;
    const waitMs = write.method === 'acquire' ? write.request.waitMs : 0;
    this.w.call<Result<unknown, FencerError>>(
      this.memberOf(cell),
      (m, answer) =>
        m.cell?.call(write.method, write.request as never, { forwarded: false }, (o) => answer(o as Result<unknown, FencerError>)),
      waitMs + CALL_SLACK_MS,
      (outcome) => this.answered(c, write, namespace, outcome),
    );
  }

  private answered(c: LockClient, write: LockWrite, namespace: string, outcome: Result<unknown, FencerError> | undefined): void {
    const think = this.w.random.range(...THINK_MS);
    if (outcome === undefined) return this.again(c, think);
    if (!outcome.ok && outcome.error.code === 'NAMESPACE_NOT_HERE') {
      this.notHereAnswers++;
      this.cellFor(c, namespace, true);
      return this.again(c, 20);
    }
    if (!outcome.ok && outcome.error.code === 'NAMESPACE_MOVING') {
      this.movingAnswers++;
      this.cellFor(c, namespace, true);
      return this.again(c, 30);
    }
    const { grant } = lockAnswered(c, write, outcome);
    if (grant !== null) this.w.checkers.ackedGrant(grant);
    this.again(c, think);
  }

  private heartbeat(c: LockClient): void {
    if (!this.running) return;
    this.w.later(HEARTBEAT_EVERY_MS, Tag.client | (c.id << 8), () => this.heartbeat(c));
    const session = c.session;
    if (session === null) return;
    const cell = this.cellFor(c, session.namespace, false);
    if (cell === undefined) return;
    const sentUs = this.w.sched.now;
    this.w.call<Result<HeartbeatAnswer[], FencerError>>(
      this.memberOf(cell),
      (m, answer) => m.cell?.heartbeat([session.id], { forwarded: false }, answer),
      CALL_SLACK_MS,
      (r) => {
        if (r === undefined || c.session !== session) return;
        if (!r.ok) {
          if (r.error.code === 'NAMESPACE_NOT_HERE') this.cellFor(c, session.namespace, true);
          return;
        }
        const a = r.value[0];
        // The session is gone: the client starts afresh.
        if (a?.expired === true) lockClientDied(c);
        else if (a !== undefined && a.ttlMsRemaining > 0) this.w.checkers.heartbeatAcked(session.id, cell, sentUs, a.ttlMsRemaining);
      },
    );
  }
}

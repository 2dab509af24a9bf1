/**
 * A small, obviously-correct reference model of the lock table, written
 * straight from the contract's promises (docs/architecture.md), for model-based tests.
 * It favours plainness over speed: arrays scanned linearly, a full request
 * history per session of which only the last `dedupe` entries are visible,
 * holders and waiters found by search. It has no snapshots, no encoding and
 * no namespace moves (those have their own tests); revision = log index.
 *
 * Every method returns the outcome in the normalized shape `normalize()`
 * gives to the real state machine's outcomes, and appends the entry's events
 * to `events` as strings.
 */
export type Mode = 'EXCLUSIVE' | 'SHARED';

export interface ModelLimits {
  readonly sessionsPerNamespaceMax: number;
  readonly locksPerSessionMax: number;
  readonly waitersPerLockMax: number;
  readonly holdersPerLockMax: number;
  readonly dedupePerSessionMax: number;
}

interface MHolder {
  s: string;
  token: number;
  mode: Mode;
  delay: number;
}
interface MWaiter {
  s: string;
  mode: Mode;
  req: string;
  delay: number;
  rev: number;
}
interface MLock {
  holders: MHolder[];
  queue: MWaiter[];
  delayedAt: number;
  delayMs: number;
}
interface MRecord {
  req: string;
  name: string;
  status: 'GRANTED' | 'QUEUED' | 'TIMED_OUT';
  token: number;
  revision: number;
  reason: string | null;
}
interface MSession {
  ns: string;
  clientId: string;
  ttl: number;
  history: MRecord[];
}

export type Obs = Record<string, unknown>;

const failure = (code: string): Obs => ({ ok: false, code });

export class ReferenceModel {
  index = 0;
  readonly nsState = new Map<string, 'active' | 'frozen'>();
  readonly sessions = new Map<string, MSession>();
  readonly locks = new Map<string, MLock>();
  events: string[] = [];

  constructor(readonly limits: ModelLimits) {}

  /** Starts the next entry. */
  next(): void {
    this.index++;
    this.events = [];
  }

  static nsOfName(name: string): string {
    return name.split('/')[2] as string;
  }

  private lookup(sid: string): Obs | undefined {
    const ns = sid.split(':')[0] as string;
    if (!this.nsState.has(ns) || !this.sessions.has(sid)) return failure('SESSION_NOT_FOUND');
    return undefined;
  }

  private frozen(sid: string): boolean {
    return this.nsState.get((this.sessions.get(sid) as MSession).ns) === 'frozen';
  }

  private visible(s: MSession): MRecord[] {
    return s.history.slice(-this.limits.dedupePerSessionMax);
  }

  private compatible(holders: MHolder[], mode: Mode): boolean {
    if (holders.length === 0) return true;
    return mode === 'SHARED' && holders.every((h) => h.mode === 'SHARED') && holders.length < this.limits.holdersPerLockMax;
  }

  private countLocks(sid: string): number {
    let n = 0;
    for (const lock of this.locks.values()) {
      if (lock.holders.some((h) => h.s === sid) || lock.queue.some((w) => w.s === sid)) n++;
    }
    return n;
  }

  private event(type: string, name: string, s: string, token: number, req: string | null): void {
    this.events.push(`${type} ${name} ${s} ${token} ${req ?? '-'}`);
  }

  private holdersOf(name: string): unknown[] {
    return (this.locks.get(name)?.holders ?? []).map((h) => [h.s, h.token, h.mode]);
  }

  /** When a waiter leaves the queue, its visible record (same request, same lock) learns the outcome. */
  private settle(sid: string, req: string, name: string, change: Partial<MRecord>): void {
    const s = this.sessions.get(sid) as MSession;
    const rec = this.visible(s).find((r) => r.req === req && r.name === name);
    if (rec !== undefined) Object.assign(rec, change);
  }

  private promote(name: string): void {
    const lock = this.locks.get(name);
    if (lock === undefined) return;
    while (lock.delayedAt === 0 && lock.queue.length > 0) {
      const head = lock.queue[0] as MWaiter;
      if (!this.compatible(lock.holders, head.mode)) break;
      lock.queue.shift();
      lock.holders.push({ s: head.s, token: this.index, mode: head.mode, delay: head.delay });
      this.settle(head.s, head.req, name, { status: 'GRANTED', token: this.index, revision: this.index });
      this.event('ACQUIRED', name, head.s, this.index, head.req);
    }
  }

  private cleanup(name: string): void {
    const lock = this.locks.get(name);
    if (lock && lock.holders.length === 0 && lock.queue.length === 0 && lock.delayedAt === 0) this.locks.delete(name);
  }

  open(sid: string, ns: string, clientId: string, ttl: number): Obs {
    if (this.nsState.get(ns) === 'frozen') return failure('NAMESPACE_MOVING');
    const existing = this.sessions.get(sid);
    if (existing)
      return existing.clientId === clientId && existing.ttl === ttl
        ? { ok: true, claimed: false, existed: true }
        : failure('INVALID_ARGUMENT');
    const inNs = [...this.sessions.values()].filter((s) => s.ns === ns).length;
    if (inNs >= this.limits.sessionsPerNamespaceMax) return failure('QUOTA_EXCEEDED');
    const claimed = !this.nsState.has(ns);
    this.nsState.set(ns, this.nsState.get(ns) ?? 'active');
    this.sessions.set(sid, { ns, clientId, ttl, history: [] });
    return { ok: true, claimed, existed: false };
  }

  acquire(sid: string, name: string, mode: Mode, req: string, tryLock: boolean, delay: number): Obs {
    const bad = this.lookup(sid);
    if (bad) return bad;
    const s = this.sessions.get(sid) as MSession;
    const rec = this.visible(s).find((r) => r.req === req);
    if (rec) {
      if (rec.status === 'GRANTED')
        return { ok: true, status: 'GRANTED', token: rec.token, revision: rec.revision, deduped: true, holders: this.holdersOf(rec.name) };
      if (rec.status === 'TIMED_OUT') return { ok: true, status: 'TIMED_OUT', reason: rec.reason, revision: rec.revision, deduped: true };
      const position = (this.locks.get(rec.name) as MLock).queue.findIndex((w) => w.s === sid && w.req === req);
      return { ok: true, status: 'QUEUED', position, revision: rec.revision, deduped: true };
    }
    const lock = this.locks.get(name);
    const myWait = lock ? lock.queue.findIndex((w) => w.s === sid) : -1;
    if (lock && myWait >= 0 && (lock.queue[myWait] as MWaiter).req === req) {
      return { ok: true, status: 'QUEUED', position: myWait, revision: (lock.queue[myWait] as MWaiter).rev, deduped: true };
    }
    if (this.frozen(sid)) return failure('NAMESPACE_MOVING');
    if (ReferenceModel.nsOfName(name) !== s.ns) return failure('WRONG_NAMESPACE');
    if (myWait >= 0) return failure('INVALID_ARGUMENT');
    const mine = lock?.holders.find((h) => h.s === sid);
    if (mine) {
      if (mine.mode !== mode) return failure('INVALID_MODE');
      s.history.push({ req, name, status: 'GRANTED', token: mine.token, revision: mine.token, reason: null });
      return { ok: true, status: 'GRANTED', token: mine.token, revision: mine.token, deduped: false, holders: this.holdersOf(name) };
    }
    const free = !lock || (lock.delayedAt === 0 && lock.queue.length === 0 && this.compatible(lock.holders, mode));
    if (!free && tryLock) {
      s.history.push({ req, name, status: 'TIMED_OUT', token: 0, revision: this.index, reason: 'busy' });
      return { ok: true, status: 'TIMED_OUT', reason: 'busy', revision: this.index, deduped: false };
    }
    if (this.countLocks(sid) >= this.limits.locksPerSessionMax) return failure('QUOTA_EXCEEDED');
    if (free) {
      const l = lock ?? { holders: [], queue: [], delayedAt: 0, delayMs: 0 };
      this.locks.set(name, l);
      l.holders.push({ s: sid, token: this.index, mode, delay });
      s.history.push({ req, name, status: 'GRANTED', token: this.index, revision: this.index, reason: null });
      this.event('ACQUIRED', name, sid, this.index, req);
      return { ok: true, status: 'GRANTED', token: this.index, revision: this.index, deduped: false, holders: this.holdersOf(name) };
    }
    const l = lock as MLock;
    if (l.queue.length >= this.limits.waitersPerLockMax) return failure('QUOTA_EXCEEDED');
    l.queue.push({ s: sid, mode, req, delay, rev: this.index });
    s.history.push({ req, name, status: 'QUEUED', token: 0, revision: this.index, reason: null });
    this.event('QUEUED', name, sid, 0, req);
    return { ok: true, status: 'QUEUED', position: l.queue.length - 1, revision: this.index, deduped: false };
  }

  release(sid: string, name: string, token: number): Obs {
    const bad = this.lookup(sid);
    if (bad) return bad;
    if (this.frozen(sid)) return failure('NAMESPACE_MOVING');
    if (ReferenceModel.nsOfName(name) !== (this.sessions.get(sid) as MSession).ns) return failure('WRONG_NAMESPACE');
    const lock = this.locks.get(name);
    const at = lock ? lock.holders.findIndex((h) => h.s === sid) : -1;
    if (!lock || at < 0 || (lock.holders[at] as MHolder).token !== token) return { ok: true, released: false };
    lock.holders.splice(at, 1);
    this.event('RELEASED', name, sid, token, null);
    this.promote(name);
    this.cleanup(name);
    return { ok: true, released: true };
  }

  cancel(sid: string, name: string, req: string, reason: string): Obs {
    const bad = this.lookup(sid);
    if (bad) return bad;
    if (this.frozen(sid)) return failure('NAMESPACE_MOVING');
    if (ReferenceModel.nsOfName(name) !== (this.sessions.get(sid) as MSession).ns) return failure('WRONG_NAMESPACE');
    const lock = this.locks.get(name);
    const at = lock ? lock.queue.findIndex((w) => w.s === sid) : -1;
    if (!lock || at < 0 || (lock.queue[at] as MWaiter).req !== req) return { ok: true, cancelled: false };
    lock.queue.splice(at, 1);
    this.settle(sid, req, name, { status: 'TIMED_OUT', reason, revision: this.index });
    this.event('CANCELED', name, sid, 0, req);
    this.promote(name);
    this.cleanup(name);
    return { ok: true, cancelled: true };
  }

  end(sid: string, expire: boolean): Obs {
    const bad = this.lookup(sid);
    if (bad) return bad;
    if (this.frozen(sid)) return failure('NAMESPACE_MOVING');
    const names = [...this.locks.keys()]
      .filter((n) => {
        const l = this.locks.get(n) as MLock;
        return l.holders.some((h) => h.s === sid) || l.queue.some((w) => w.s === sid);
      })
      .sort();
    const released: string[] = [];
    const delayed: unknown[] = [];
    for (const name of names) {
      const lock = this.locks.get(name) as MLock;
      const hi = lock.holders.findIndex((h) => h.s === sid);
      if (hi >= 0) {
        const [h] = lock.holders.splice(hi, 1) as [MHolder];
        released.push(name);
        this.event('EXPIRED', name, sid, h.token, null);
        if (expire && h.delay > 0) {
          lock.delayedAt = this.index;
          lock.delayMs = h.delay;
          delayed.push([name, h.delay, this.index]);
        }
      } else {
        const wi = lock.queue.findIndex((w) => w.s === sid);
        const [w] = lock.queue.splice(wi, 1) as [MWaiter];
        this.event('EXPIRED', name, sid, 0, w.req);
      }
      this.promote(name);
      this.cleanup(name);
    }
    this.sessions.delete(sid);
    return expire ? { ok: true, released, delayed } : { ok: true, released };
  }

  lift(name: string, delayRevision: number): Obs {
    const ns = ReferenceModel.nsOfName(name);
    if (!this.nsState.has(ns)) return { ok: true, lifted: false };
    if (this.nsState.get(ns) === 'frozen') return failure('NAMESPACE_MOVING');
    const lock = this.locks.get(name);
    if (!lock || lock.delayedAt === 0 || lock.delayedAt !== delayRevision) return { ok: true, lifted: false };
    lock.delayedAt = 0;
    lock.delayMs = 0;
    this.promote(name);
    this.cleanup(name);
    return { ok: true, lifted: true };
  }

  setFrozen(ns: string, frozen: boolean): Obs {
    const state = this.nsState.get(ns);
    if (state === undefined) return failure('NAMESPACE_NOT_HERE');
    const target = frozen ? 'frozen' : 'active';
    if (state === target) return { ok: true, changed: false };
    this.nsState.set(ns, target);
    return { ok: true, changed: true };
  }

  /** GetLock in the normalized shape. */
  lockView(name: string): Obs {
    const lock = this.locks.get(name);
    return {
      mode: lock?.holders[0]?.mode ?? null,
      holders: (lock?.holders ?? []).map((h) => [h.s, h.token, h.mode]),
      waiters: (lock?.queue ?? []).map((w) => [w.s, w.mode, w.req]),
      delayed: (lock?.delayedAt ?? 0) !== 0,
    };
  }

  /** Current token of `sid` on `name`, or 0. */
  tokenOf(sid: string, name: string): number {
    return this.locks.get(name)?.holders.find((h) => h.s === sid)?.token ?? 0;
  }

  /** Names `sid` holds, sorted. */
  heldBy(sid: string): string[] {
    return [...this.locks.keys()].filter((n) => this.locks.get(n)?.holders.some((h) => h.s === sid)).sort();
  }

  /** The request `sid` waits with for `name`, if it waits. */
  waitingRequestOf(sid: string, name: string): string | undefined {
    return this.locks.get(name)?.queue.find((w) => w.s === sid)?.req;
  }

  delayRevisionOf(name: string): number {
    return this.locks.get(name)?.delayedAt ?? 0;
  }
}

/**
 * `FakeLockService.locks`: a read view of the fake cell's lock table in the
 * contract's shapes, for assertions (`fake.locks.get(name)!.holders`). Every
 * valid name has a lock, free or not, as GetLock answers; iterating walks
 * the live ones. Assigning `holders` a list without some of them releases
 * those, as another actor would (a stale-token test); adding holders that
 * way is refused: acquire through a client.
 */
import { Revision } from '@fencer/base';
import { LIST_LOCKS_LIMIT_MAX, parseLockName } from '@fencer/contract';
import { isFailure } from '@fencer/lock-fsm';
import type { lockservice } from '@fencer/protocol';
import type { FakeCell } from './fake-cell.js';
import { holderToPb, waiterToPb } from './fake-wire.js';

/** Pages of one namespace that iteration reads at most (each holds LIST_LOCKS_LIMIT_MAX locks). */
const PAGES_PER_NAMESPACE_MAX = 10_000;

export interface FakeLock {
  readonly name: string;
  /** Current holders; assign a list without some of them to release those. */
  holders: lockservice.Holder[];
  /** FIFO order, head first. */
  readonly waiters: lockservice.Waiter[];
}

export class FakeLocks implements Iterable<[string, FakeLock]> {
  constructor(private readonly cell: FakeCell) {}

  /** The lock of a valid name (free when nobody holds or awaits it); undefined for an invalid name. */
  get(name: string): FakeLock | undefined {
    return parseLockName(name).ok ? this.view(name) : undefined;
  }

  /** Whether someone holds or awaits the lock (or a lock-delay holds it back). */
  has(name: string): boolean {
    return parseLockName(name).ok && this.isLive(name);
  }

  get size(): number {
    return [...this.names()].length;
  }

  *keys(): IterableIterator<string> {
    yield* this.names();
  }

  *values(): IterableIterator<FakeLock> {
    for (const name of this.names()) yield this.view(name);
  }

  *[Symbol.iterator](): IterableIterator<[string, FakeLock]> {
    for (const name of this.names()) yield [name, this.view(name)];
  }

  private isLive(name: string): boolean {
    const lock = this.cell.fsm.getLock(name);
    return lock.holders.length > 0 || lock.waiters.length > 0 || lock.delayed;
  }

  /** Live lock names, namespace by namespace, each in name order. */
  private *names(): IterableIterator<string> {
    for (const ns of this.cell.fsm.namespaces()) {
      let pageToken = '';
      for (let pages = 0; pages < PAGES_PER_NAMESPACE_MAX; pages++) {
        const page = this.cell.fsm.listLocks(`/ls/${ns.namespace}/`, LIST_LOCKS_LIMIT_MAX, pageToken);
        if (isFailure(page)) break;
        for (const lock of page.locks) yield lock.name;
        if (page.nextPageToken === '') break;
        pageToken = page.nextPageToken;
      }
    }
  }

  private view(name: string): FakeLock {
    const cell = this.cell;
    return {
      name,
      get holders(): lockservice.Holder[] {
        return cell.fsm.getLock(name).holders.map(holderToPb);
      },
      set holders(keep: lockservice.Holder[]) {
        const current = cell.fsm.getLock(name).holders;
        const kept = new Set(keep.map((h) => `${h.sessionId}@${h.token}`));
        if (keep.some((h) => !current.some((c) => c.sessionId === h.sessionId && c.token === h.token))) {
          throw new Error(`the fake adds no holders of ${name} by assignment: acquire through a client`);
        }
        for (const h of current) {
          if (!kept.has(`${h.sessionId}@${h.token}`))
            cell.apply({ kind: 'Release', sessionId: h.sessionId, name, token: Revision(h.token) });
        }
      },
      get waiters(): lockservice.Waiter[] {
        return cell.fsm.getLock(name).waiters.map(waiterToPb);
      },
    };
  }
}

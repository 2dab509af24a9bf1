/**
 * Watch on this replica: the hub fed by the apply stream (watch-hub.ts),
 * and the start of a watch. A watch from now (since_revision 0) is
 * linearizable wherever it runs: the leader passes a read barrier; a
 * follower asks the leader for its revision after one (any read on it
 * gives one) and waits until it has applied that far itself (a catch-up,
 * bounded in number and in time). Then one SNAPSHOT per live lock,
 * PROGRESS, and live events. A watch from a revision resumes from the
 * hub's history at once.
 */
import { FencerError, type Result } from '@fencer/base';
import type { Cancel, GroupCore } from '@fencer/group';
import { LIST_LOCKS_LIMIT_MAX } from '@fencer/contract';
import { type LockState, type LockStateMachine, isFailure } from '@fencer/lock-fsm';
import type { LockCellConfig } from './config.js';
import type { CellEnv } from './env.js';
import { CATCH_UP_TIMEOUT_MS, CATCH_UP_WAITS_MAX } from './limits.js';
import type { RequestApi } from './request-api.js';
import { checkWatchTarget, namespaceOfName } from './validation.js';
import { WatchHub, type WatchSink } from './watch-hub.js';

export type WatchRequest = { readonly name: string; readonly prefix: boolean; readonly sinceRevision: number };

export interface WatchesParts {
  readonly config: LockCellConfig;
  readonly env: CellEnv;
  readonly core: GroupCore;
  /** The lock state as applied here now. */
  readonly fsm: () => LockStateMachine;
  /** A follower learns the leader's revision through a read (the request API, which forwards it). */
  readonly requests: () => RequestApi;
}

interface CatchUp {
  readonly revision: number;
  readonly run: () => void;
}

export class Watches {
  readonly hub: WatchHub;
  /** Follower watches waiting for this replica to apply up to the leader's revision; at most CATCH_UP_WAITS_MAX. */
  private readonly catchUps = new Set<CatchUp>();

  constructor(private readonly parts: WatchesParts) {
    const { config } = parts;
    this.hub = new WatchHub({
      historyMax: config.watchHistoryMax,
      watcherBufferMax: config.watcherBufferMax,
      watchersMax: config.watchersMax,
      progressIntervalMs: config.watchProgressMs,
    });
  }

  /**
   * Starts a Watch on this replica. `started` gets null once the watcher is
   * subscribed, or the error that ends it. The returned cancel unsubscribes
   * (or abandons the start).
   */
  watch(req: WatchRequest, sink: WatchSink, started: (error: FencerError | null) => void): Cancel {
    let stopped = false;
    let abandon: Cancel = () => {};
    const stop: Cancel = () => {
      stopped = true;
      abandon();
      this.hub.unsubscribe(sink);
    };
    try {
      checkWatchTarget(req.name, req.prefix);
    } catch (e) {
      started(e as FencerError);
      return stop;
    }
    if (req.sinceRevision !== 0) {
      this.subscribe(req, sink, started);
      return stop;
    }
    abandon = this.linearizableFloor(req, (error) => {
      if (stopped) return;
      if (error) return started(error);
      this.subscribe(req, sink, started);
    });
    return stop;
  }

  /** The namespace froze at `revision`: its watchers end, each told it has everything up to there (watch-hub.ts). */
  namespaceFrozen(namespace: string, revision: number): void {
    this.hub.endNamespace(revision, (filter) => namespaceOfName(filter.name) === namespace);
  }

  /** Runs the catch-ups this replica's applied state now satisfies (after every apply and restore). */
  runCatchUps(): void {
    if (this.catchUps.size === 0) return;
    const revision = this.parts.fsm().revision;
    for (const wait of [...this.catchUps]) if (revision >= wait.revision) wait.run();
  }

  /** Every live lock under a prefix, ordered by name (Watch's starting SNAPSHOT). */
  *allLocks(prefix: string): Generator<LockState> {
    let pageToken = '';
    do {
      const page = this.parts.fsm().listLocks(prefix, LIST_LOCKS_LIMIT_MAX, pageToken);
      if (isFailure(page)) return;
      yield* page.locks;
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
  }

  private subscribe(req: WatchRequest, sink: WatchSink, started: (error: FencerError | null) => void): void {
    const namespace = namespaceOfName(req.name);
    const bad = this.parts.fsm().checkNamespace(namespace);
    if (bad) return started(new FencerError(bad.code, bad.message));
    // A frozen namespace is moving: a watch started here now would be ended by the drop, or see another cell's
    // revisions; the caller resumes once the move is over, wherever the namespace then lives.
    if (this.parts.fsm().namespaceInfo(namespace)?.state === 'frozen')
      return started(new FencerError('NAMESPACE_MOVING', `namespace "${namespace}" is frozen for a move; resume the watch shortly`));
    const filter = { name: req.name, prefix: req.prefix };
    const r = this.hub.subscribe(filter, req.sinceRevision, sink, this.parts.env.clock.monoMs(), () => this.snapshotLocks(req), namespace);
    if (r === 'compacted') {
      return started(
        new FencerError(
          'COMPACTED',
          `revision ${req.sinceRevision} is older than this node's watch history (from ${this.hub.floorRevision}); resync with GetLock, then watch from its revision`,
        ),
      );
    }
    if (r === 'full') return started(new FencerError('TOO_MANY_REQUESTS', 'this node has too many watchers; try another replica'));
    started(null);
  }

  /** Runs `then` once this replica's state includes every write committed before the call (a read barrier). */
  private linearizableFloor(req: WatchRequest, then: (error: FencerError | null) => void): Cancel {
    if (this.parts.core.isLeader) {
      this.parts.core.readBarrier(then);
      return () => {};
    }
    // The leader's revision after its own read barrier: any read on it gives one.
    const learn = (outcome: Result<{ revision: number }, FencerError>): void => {
      if (!outcome.ok) return then(outcome.error);
      cancelCatchUp = this.catchUp(outcome.value.revision, then);
    };
    let cancelCatchUp: Cancel = () => {};
    const requests = this.parts.requests();
    const cancelCall = req.prefix
      ? requests.call('listLocks', { prefix: req.name, limit: 1, pageToken: '' }, { forwarded: false }, learn)
      : requests.call('getLock', { name: req.name }, { forwarded: false }, learn);
    return () => {
      cancelCall();
      cancelCatchUp();
    };
  }

  /** Runs `then` once this replica has applied up to `revision`, or fails after CATCH_UP_TIMEOUT_MS. */
  private catchUp(revision: number, then: (error: FencerError | null) => void): Cancel {
    if (this.parts.fsm().revision >= revision) {
      then(null);
      return () => {};
    }
    if (this.catchUps.size >= CATCH_UP_WAITS_MAX) {
      then(new FencerError('TOO_MANY_REQUESTS', 'too many watches are waiting for this replica to catch up; try another replica'));
      return () => {};
    }
    const wait: CatchUp = {
      revision,
      run: () => {
        timer();
        this.catchUps.delete(wait);
        then(null);
      },
    };
    this.catchUps.add(wait);
    const timer = this.parts.env.after(CATCH_UP_TIMEOUT_MS, () => {
      if (!this.catchUps.delete(wait)) return;
      then(
        new FencerError(
          'DEADLINE_EXCEEDED',
          `this replica did not catch up with the leader (revision ${revision}) within ${CATCH_UP_TIMEOUT_MS} ms; retry or watch another replica`,
        ),
      );
    });
    return () => {
      timer();
      this.catchUps.delete(wait);
    };
  }

  private snapshotLocks(req: WatchRequest): Iterable<LockState> {
    if (!req.prefix) {
      const lock = this.parts.fsm().getLock(req.name);
      return lock.holders.length > 0 || lock.waiters.length > 0 ? [lock] : [];
    }
    return this.allLocks(req.name);
  }
}

/**
 * watch(): an async iterator over a lock's or a prefix's events that survives
 * reconnects. It resumes from the last revision it has seen completely, so
 * it misses nothing; and since one log entry can produce several events at
 * one revision, it remembers how many of the current revision's events it has
 * delivered and skips exactly those after a reconnect, so it repeats nothing.
 * When the node no longer has that history (COMPACTED) it yields a 'resync'
 * marker and starts over from current state: for one lock a GetLock snapshot
 * (then watches from its revision), for a prefix the server's snapshot of
 * every live lock (since_revision 0). Consumers drop what they knew on
 * 'resync'.
 */
import { FencerError } from '@fencer/base';
import { parseLockName, parseLockPrefix } from '@fencer/contract';
import { type ClientReadableStream, Metadata } from '@grpc/grpc-js';
import { isRetryable, type lockservice } from '@fencer/protocol';
import { lockFromPb, watchEventFromPb } from './convert.js';
import { CLIENT_LIMITS } from './limits.js';
import { backoffMs, callWithRetry, toFencerError, type CallContext } from './retry.js';
import { sleep } from './scheduler.js';
import type { WatchEventInfo } from './types.js';

export interface WatchOptions {
  /** Deliver events after this revision; 0 (default) starts with a snapshot of current state. */
  readonly sinceRevision?: number;
  /** Treat the name as a prefix; defaults to true when it ends with "/". */
  readonly prefix?: boolean;
  /** Ends the iteration (without an error). */
  readonly signal?: AbortSignal;
}

/**
 * Where a watch stands, so that a new stream resumes with no gap and no
 * repeat. In the snapshot phase (a since_revision 0 stream before its
 * PROGRESS) a break restarts the snapshot and skips locks already delivered
 * at the same revision. In the events phase `cur` is the revision of the
 * last delivered event and `seenAtCur` how many events at `cur` were
 * delivered: the next stream resumes from cur - 1 and skips that many,
 * because one log entry can yield several events.
 */
class WatchCursor {
  private snapshotPhase: boolean;
  private snapshotRevision = -1;
  private readonly snapshotNames = new Set<string>();
  private cur: number;
  private seenAtCur = 0;
  /** Events at `cur` that the current stream repeats from before the break. */
  private skip = 0;
  /** COMPACTED resyncs since the last delivered change. */
  private resyncs = 0;

  constructor(sinceRevision: number) {
    this.snapshotPhase = sinceRevision === 0;
    this.cur = sinceRevision;
  }

  get revision(): number {
    return this.cur;
  }

  /** The since_revision of the next stream (and how many of its first events to skip). */
  resume(): number {
    const fromPrevious = !this.snapshotPhase && this.seenAtCur > 0 && this.cur > 1;
    this.skip = fromPrevious ? this.seenAtCur : 0;
    return this.snapshotPhase ? 0 : fromPrevious ? this.cur - 1 : this.cur;
  }

  /** Whether to deliver `ev` (false for what was delivered before a break); moves the position past it. */
  admit(ev: WatchEventInfo): boolean {
    if (ev.type === 'progress') {
      if (this.snapshotPhase || ev.revision >= this.cur) this.moveTo(ev.revision, 0);
      this.snapshotPhase = false;
      this.skip = 0;
      return true;
    }
    if (ev.type === 'snapshot' && this.snapshotPhase) return this.admitSnapshot(ev);
    if (this.snapshotPhase) {
      // A change without the PROGRESS that should close the snapshot: treat the snapshot as complete.
      this.snapshotPhase = false;
      this.moveTo(Math.max(this.snapshotRevision, 0), 0);
    }
    if (this.skip > 0 && ev.revision === this.cur) {
      this.skip--; // delivered before the reconnect
      return false;
    }
    this.skip = 0;
    this.resyncs = 0;
    if (ev.revision > this.cur) this.moveTo(ev.revision, 1);
    else this.seenAtCur = Math.min(this.seenAtCur + 1, CLIENT_LIMITS.watchSkipMax);
    return true;
  }

  private admitSnapshot(ev: WatchEventInfo): boolean {
    if (ev.revision === this.snapshotRevision && this.snapshotNames.has(ev.name)) return false; // delivered before the break
    if (ev.revision !== this.snapshotRevision) {
      this.snapshotRevision = ev.revision;
      this.snapshotNames.clear();
    }
    if (this.snapshotNames.size < CLIENT_LIMITS.watchSkipMax) this.snapshotNames.add(ev.name);
    return true;
  }

  private moveTo(revision: number, seen: number): void {
    this.cur = revision;
    this.seenAtCur = seen;
  }

  /** History is gone (COMPACTED): false once resyncs keep failing without a change in between. */
  beginResync(): boolean {
    if (++this.resyncs > CLIENT_LIMITS.watchResyncsMax) return false;
    this.seenAtCur = 0;
    return true;
  }

  /** A prefix resyncs from the server's snapshot of every live lock (since_revision 0). */
  restartSnapshot(): void {
    this.snapshotPhase = true;
    this.snapshotRevision = -1;
    this.snapshotNames.clear();
  }

  /** A name resyncs from a GetLock read at `revision`, then watches from there. */
  restartAt(revision: number): void {
    this.snapshotPhase = false;
    this.cur = revision;
  }
}

/** A name or prefix the contract refuses fails the iteration, not the call that created it. */
function checkTarget(name: string, prefix: boolean): void {
  const parsed = prefix ? parseLockPrefix(name) : parseLockName(name);
  if (!parsed.ok) throw new FencerError(parsed.code, parsed.message);
}

/** COMPACTED: a 'resync' marker, then current state (for a name; a prefix gets the server's snapshot). */
async function* resync(
  ctx: CallContext,
  name: string,
  prefix: boolean,
  cursor: WatchCursor,
  error: FencerError,
  signal: AbortSignal | undefined,
): AsyncGenerator<WatchEventInfo, void, undefined> {
  const revision = cursor.revision;
  if (!cursor.beginResync()) throw error;
  yield { type: 'resync', revision, name: '', sessionId: '', token: 0 };
  if (prefix) return cursor.restartSnapshot();
  const got = await callWithRetry<lockservice.GetLockRequest, lockservice.GetLockResponse>(ctx, 'getLock', { name }, { signal });
  cursor.restartAt(got.revision);
  yield { type: 'snapshot', revision: got.revision, name, sessionId: '', token: 0, lock: lockFromPb(got.lock, name) };
}

export async function* watchEvents(
  ctx: CallContext,
  name: string,
  options: WatchOptions = {},
): AsyncGenerator<WatchEventInfo, void, undefined> {
  const { pool, scheduler, random, policy } = ctx;
  const prefix = options.prefix ?? name.endsWith('/');
  const signal = options.signal;
  checkTarget(name, prefix);
  const since0 = options.sinceRevision ?? 0;
  if (!(Number.isSafeInteger(since0) && since0 >= 0))
    throw new FencerError('INVALID_ARGUMENT', `sinceRevision must be a non-negative integer, got ${since0}`);
  const cursor = new WatchCursor(since0);
  let failingSinceMonoMs: number | undefined;
  let attempt = 0;
  while (!signal?.aborted) {
    const address = pool.current();
    const stream = pool
      .stub(address)
      .watch(
        { name, prefix, sinceRevision: cursor.resume() },
        ctx.metadata?.() ?? new Metadata(),
      ) as ClientReadableStream<lockservice.WatchEvent>;
    const onAbort = (): void => stream.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    let error: FencerError | undefined;
    try {
      for await (const pb of stream as AsyncIterable<lockservice.WatchEvent>) {
        failingSinceMonoMs = undefined;
        attempt = 0;
        const ev = watchEventFromPb(pb);
        if (ev && cursor.admit(ev)) yield ev;
      }
    } catch (e) {
      error = toFencerError(e);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      stream.cancel();
    }
    if (signal?.aborted) return;
    error ??= new FencerError('SHUTTING_DOWN', `${address} ended the watch stream`);
    if (error.code === 'COMPACTED') {
      yield* resync(ctx, name, prefix, cursor, error, signal);
      continue;
    }
    if (!isRetryable(error.code) && error.code !== 'CANCELLED' && error.code !== 'INTERNAL') throw error;
    failingSinceMonoMs ??= scheduler.monoMs();
    if (scheduler.monoMs() - failingSinceMonoMs >= policy.retryBudgetMs) throw error;
    if (error.leaderHint && error.leaderHint !== address) pool.noteLeader(error.leaderHint);
    else pool.advance(address);
    try {
      await sleep(scheduler, backoffMs(random, attempt++, policy.backoffBaseMs, policy.backoffMaxMs), signal);
    } catch {
      return; // aborted while waiting
    }
  }
}

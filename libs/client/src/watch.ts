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
import type { ClientReadableStream } from '@grpc/grpc-js';
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

export async function* watchEvents(
  ctx: CallContext,
  name: string,
  options: WatchOptions = {},
): AsyncGenerator<WatchEventInfo, void, undefined> {
  const { pool, scheduler, random, policy } = ctx;
  const prefix = options.prefix ?? name.endsWith('/');
  const signal = options.signal;
  const since0 = options.sinceRevision ?? 0;
  if (!(Number.isSafeInteger(since0) && since0 >= 0))
    throw new FencerError('INVALID_ARGUMENT', `sinceRevision must be a non-negative integer, got ${since0}`);
  // Where to resume. In the snapshot phase (a since_revision 0 stream before its PROGRESS) a break
  // restarts the snapshot and skips locks already delivered at the same revision. In the events phase
  // `cur` is the revision of the last delivered event and `seenAtCur` how many events at `cur` were
  // delivered: resume from cur - 1 and skip that many, because one log entry can yield several events.
  let snapshotPhase = since0 === 0;
  let snapshotRevision = -1;
  const snapshotNames = new Set<string>();
  let cur = since0;
  let seenAtCur = 0;
  let failingSinceMonoMs: number | undefined;
  let attempt = 0;
  let resyncs = 0;
  while (!signal?.aborted) {
    const address = pool.current();
    const resumeFromPrevious = !snapshotPhase && seenAtCur > 0 && cur > 1;
    const sinceRevision = snapshotPhase ? 0 : resumeFromPrevious ? cur - 1 : cur;
    let skip = resumeFromPrevious ? seenAtCur : 0;
    const stream = pool.stub(address).watch({ name, prefix, sinceRevision }) as ClientReadableStream<lockservice.WatchEvent>;
    const onAbort = (): void => stream.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    let error: FencerError | undefined;
    try {
      for await (const pb of stream as AsyncIterable<lockservice.WatchEvent>) {
        const ev = watchEventFromPb(pb);
        failingSinceMonoMs = undefined;
        attempt = 0;
        if (!ev) continue;
        if (ev.type === 'progress') {
          if (snapshotPhase || ev.revision >= cur) {
            cur = ev.revision;
            seenAtCur = 0;
          }
          snapshotPhase = false;
          skip = 0;
          yield ev;
          continue;
        }
        if (ev.type === 'snapshot' && snapshotPhase) {
          if (ev.revision === snapshotRevision && snapshotNames.has(ev.name)) continue; // delivered before the break
          if (ev.revision !== snapshotRevision) {
            snapshotRevision = ev.revision;
            snapshotNames.clear();
          }
          if (snapshotNames.size < CLIENT_LIMITS.watchSkipMax) snapshotNames.add(ev.name);
          yield ev;
          continue;
        }
        if (snapshotPhase) {
          // A change without the PROGRESS that should close the snapshot: treat the snapshot as complete.
          snapshotPhase = false;
          cur = Math.max(snapshotRevision, 0);
          seenAtCur = 0;
        }
        if (skip > 0 && ev.revision === cur) {
          skip--; // delivered before the reconnect
          continue;
        }
        skip = 0;
        resyncs = 0;
        if (ev.revision > cur) {
          cur = ev.revision;
          seenAtCur = 1;
        } else {
          seenAtCur = Math.min(seenAtCur + 1, CLIENT_LIMITS.watchSkipMax);
        }
        yield ev;
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
      if (++resyncs > CLIENT_LIMITS.watchResyncsMax) throw error;
      yield { type: 'resync', revision: cur, name: '', sessionId: '', token: 0 };
      seenAtCur = 0;
      if (prefix) {
        snapshotPhase = true;
        snapshotRevision = -1;
        snapshotNames.clear();
      } else {
        const got = await callWithRetry<lockservice.GetLockRequest, lockservice.GetLockResponse>(ctx, 'getLock', { name }, { signal });
        snapshotPhase = false;
        cur = got.revision;
        yield { type: 'snapshot', revision: got.revision, name, sessionId: '', token: 0, lock: lockFromPb(got.lock, name) };
      }
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

/**
 * One session in one namespace: its id, its local lease (lease.ts), the lock
 * handles it holds, and the operations waiting out a jeopardy. The KeepAlive
 * stream (keepalive.ts) renews the lease; this class turns lease transitions
 * into events and into aborted handle signals.
 */
import { EventEmitter } from 'node:events';
import { assert, FencerError } from '@fencer/base';
import { Lease, type LeaseConfig, type LeaseTransition } from './lease.js';
import { CLIENT_LIMITS, heartbeatIntervalMs } from './limits.js';
import type { LockHandle } from './lock-handle.js';
import type { SessionState } from './types.js';

export interface SessionEvents {
  /** The local lease ran out without renewal: stop writing; locks are kept while the client retries. */
  jeopardy: [];
  /** The session survived a jeopardy: the cell renewed it. */
  safe: [];
  /** The session is gone and with it every lock it held. */
  expired: [];
}

interface Waiter {
  resolve(): void;
  reject(e: unknown): void;
}

export class Session extends EventEmitter<SessionEvents> {
  readonly lease: Lease;
  /** Monotonic send time of the heartbeat awaiting its answer; at most one per session, so answers map to sends exactly. */
  inFlightSentMonoMs: number | undefined;
  /** When the next heartbeat is due. */
  nextBeatMonoMs: number;
  private readonly handleSet = new Set<LockHandle>();
  private readonly waiters = new Set<Waiter>();
  private closedFlag = false;

  constructor(
    readonly id: string,
    readonly namespace: string,
    readonly clientId: string,
    config: LeaseConfig,
    openedSentMonoMs: number,
  ) {
    super();
    assert(id.length > 0, 'a session has an id');
    this.lease = new Lease(config, openedSentMonoMs);
    this.nextBeatMonoMs = openedSentMonoMs + heartbeatIntervalMs(config.ttlMs);
  }

  get ttlMs(): number {
    return this.lease.config.ttlMs;
  }

  get state(): SessionState {
    return this.lease.state;
  }

  /** Closed by this process (CloseSession), as opposed to expired. */
  get closed(): boolean {
    return this.closedFlag;
  }

  get handles(): ReadonlySet<LockHandle> {
    return this.handleSet;
  }

  addHandle(handle: LockHandle): void {
    if (this.handleSet.size >= CLIENT_LIMITS.handlesPerSessionMax) {
      throw new FencerError('QUOTA_EXCEEDED', `a session holds at most ${CLIENT_LIMITS.handlesPerSessionMax} locks in this client`);
    }
    this.handleSet.add(handle);
    // A grant that lands while the session is already in jeopardy is born unsafe.
    if (this.state === 'jeopardy') handle.lose('jeopardy');
  }

  removeHandle(handle: LockHandle): void {
    this.handleSet.delete(handle);
  }

  /** Resolves once the session is safe; rejects when it expires (or the signal aborts) first. */
  whenUsable(signal?: AbortSignal): Promise<void> {
    if (this.state === 'safe' && !this.closedFlag) return Promise.resolve();
    if (this.state === 'expired' || this.closedFlag) return Promise.reject(this.goneError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.waiters.delete(w);
        reject(signal!.reason);
      };
      const w: Waiter = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      this.waiters.add(w);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  goneError(): FencerError {
    return new FencerError(
      'SESSION_NOT_FOUND',
      this.closedFlag ? `session ${this.id} was closed` : `session ${this.id} expired; its locks are released`,
    );
  }

  /** Applies a lease transition: aborts handle signals, wakes or fails waiting operations, emits the event. */
  applyTransition(t: LeaseTransition | undefined): void {
    if (t === undefined) return;
    switch (t) {
      case 'jeopardy':
        for (const h of this.handleSet) h.lose('jeopardy');
        this.emit('jeopardy');
        return;
      case 'safe':
        for (const w of this.waiters) w.resolve();
        this.waiters.clear();
        this.emit('safe');
        return;
      case 'expired': {
        for (const h of this.handleSet) h.lose('expired');
        this.handleSet.clear();
        const error = this.goneError();
        for (const w of this.waiters) w.reject(error);
        this.waiters.clear();
        if (!this.closedFlag) this.emit('expired');
        return;
      }
    }
  }

  /** Marks the session closed by this process: handles lose with 'closed', waiters fail. No event. */
  markClosed(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    for (const h of this.handleSet) h.lose('closed');
    this.handleSet.clear();
    this.lease.expire();
    const error = this.goneError();
    for (const w of this.waiters) w.reject(error);
    this.waiters.clear();
  }
}

/**
 * The leader's view of one follower (etcd's tracker.Progress): how far its
 * log matches ours, what to send next, and which flow-control state it is
 * in.
 *
 * - probe: we do not know where its log matches; send one append per
 *   round trip (or heartbeat) and back off on rejection.
 * - replicate: its log matches up to `match`; stream appends optimistically,
 *   at most maxInflightMsgs un-acknowledged.
 * - snapshot: it needs entries we compacted; send the snapshot in chunks
 *   and nothing else until it answers.
 */
import { AssertionError, assert } from '@fencer/base';
import type { Snapshot } from './types.js';

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

/** A ring of the last index of each un-acknowledged append, oldest first. */
export class Inflights {
  private readonly buffer: number[];
  private start = 0;
  count = 0;

  constructor(readonly capacity: number) {
    assert(Number.isSafeInteger(capacity) && capacity > 0, `inflight capacity must be positive, got ${capacity}`);
    this.buffer = new Array<number>(capacity).fill(0);
  }

  full(): boolean {
    return this.count === this.capacity;
  }

  add(lastIndex: number): void {
    assert(!this.full(), 'cannot add to a full inflight window');
    if (this.count > 0) {
      const newest = this.buffer[(this.start + this.count - 1) % this.capacity] as number;
      if (!(lastIndex > newest)) throw new AssertionError(`inflight indexes must grow: ${lastIndex} after ${newest}`);
    }
    this.buffer[(this.start + this.count) % this.capacity] = lastIndex;
    this.count++;
  }

  /** Frees every append whose last index is <= index (acknowledged by a response covering it). */
  freeLE(index: number): void {
    while (this.count > 0 && (this.buffer[this.start] as number) <= index) {
      this.start = (this.start + 1) % this.capacity;
      this.count--;
    }
    if (this.count === 0) this.start = 0;
  }

  freeFirstOne(): void {
    if (this.count === 0) return;
    this.start = (this.start + 1) % this.capacity;
    this.count--;
  }

  reset(): void {
    this.start = 0;
    this.count = 0;
  }
}

/** A snapshot being streamed to one follower, stop-and-wait, one chunk at a time. */
export interface SnapshotTransfer {
  readonly snapshot: Snapshot;
  /** Bytes the follower has confirmed; the next chunk starts here. */
  ackedOffset: number;
  /** Leader ticks since the last chunk was sent or acknowledged; a stalled chunk is resent. */
  stallTicks: number;
}

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** In snapshot state: the index of the snapshot being sent. */
  pendingSnapshot = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /** In probe state: an append is out and we wait for its answer (or a heartbeat answer). */
  probeSent = false;
  /** The highest commit index we told this follower (avoids empty appends that carry nothing new). */
  sentCommit = 0;
  transfer: SnapshotTransfer | null = null;
  readonly inflights: Inflights;

  constructor(next: number, inflightCapacity: number) {
    assert(next >= 1, `next index must be at least 1, got ${next}`);
    this.next = next;
    this.inflights = new Inflights(inflightCapacity);
  }

  becomeProbe(): void {
    if (this.state === 'snapshot') {
      const pending = this.pendingSnapshot;
      this.resetState('probe');
      this.next = Math.max(this.match + 1, pending + 1);
    } else {
      this.resetState('probe');
      this.next = this.match + 1;
    }
  }

  becomeReplicate(): void {
    this.resetState('replicate');
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState('snapshot');
    this.pendingSnapshot = snapshotIndex;
  }

  /** An acknowledgement up to n: returns true when it taught us something new. */
  maybeUpdate(n: number): boolean {
    let updated = false;
    if (this.match < n) {
      this.match = n;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, n + 1);
    return updated;
  }

  /** Pipelining: assume the append up to n arrives. */
  optimisticUpdate(n: number): void {
    this.next = n + 1;
  }

  /**
   * A rejection of the append whose previous index was `rejected`, with the
   * follower's hint of where our logs may match. Returns false for a stale
   * rejection (of an append we no longer care about).
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1);
    this.probeSent = false;
    assert(this.next >= 1, 'next index stays positive');
    return true;
  }

  isPaused(): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.inflights.full();
      case 'snapshot':
        return true;
    }
  }

  private resetState(state: ProgressState): void {
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.state = state;
    this.inflights.reset();
    this.transfer = null;
  }
}

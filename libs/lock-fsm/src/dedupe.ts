/**
 * Per session: the outcomes of its last `max` request ids (64 by default), so
 * a retried request gets the same answer (docs/architecture.md, "Retries").
 *
 * Why not a Map of record objects: every acquire looks up a new request id,
 * evicts the oldest and inserts the new one. With a Map per session that
 * cost a hash-table probe through scattered memory for each step, a table
 * reallocation every `max` inserts, and one record object per request that
 * lived long enough to reach the old generation. Here a session's records
 * live in parallel arrays used as a ring (the oldest slot is overwritten),
 * found through a small open-addressing index of 32-bit string hashes: no
 * allocation once the ring is full, and a lookup touches a few cache lines.
 *
 * Deterministic: the hash only decides where an entry sits in the index,
 * never which entries exist or their order; iteration is arrival order,
 * kept by the ring.
 */
import { assert, type Revision } from '@fencer/base';
import type { TimedOutReason } from './types.js';

export type DedupeStatus = 'GRANTED' | 'QUEUED' | 'TIMED_OUT';

/** Status and reason codes; the snapshot uses the same numbers. */
export const STATUS_GRANTED = 1;
export const STATUS_QUEUED = 2;
export const STATUS_TIMED_OUT = 3;
export const REASON_NONE = 0;
export const REASON_BUSY = 1;
export const REASON_TIMED_OUT = 2;
export const REASON_CANCELLED = 3;

const STATUS_OF: readonly (DedupeStatus | undefined)[] = [undefined, 'GRANTED', 'QUEUED', 'TIMED_OUT'];
const REASON_OF: readonly (TimedOutReason | null)[] = [null, 'busy', 'timed-out', 'cancelled'];

export function statusCode(status: DedupeStatus): number {
  return status === 'GRANTED' ? STATUS_GRANTED : status === 'QUEUED' ? STATUS_QUEUED : STATUS_TIMED_OUT;
}

export function reasonCode(reason: TimedOutReason | null): number {
  return reason === null ? REASON_NONE : reason === 'busy' ? REASON_BUSY : reason === 'timed-out' ? REASON_TIMED_OUT : REASON_CANCELLED;
}

/**
 * FNV-1a 32 over UTF-16 code units: spreads similar ids ("req-1", "req-2")
 * across the index. Callers compute it once per request id and pass it to
 * `find` and `add`.
 */
export function dedupeHash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h ^ (h >>> 16);
}

/** Ring capacity of a new table: sessions that issue few requests stay small. */
const INITIAL_CAPACITY = 4;

/**
 * Layout: `ids` and `names` hold each slot's request id and lock name;
 * `nums` holds each slot's token and revision (2 per slot, doubles: both can
 * exceed 2^31); `ints` holds each slot's status|reason<<2 and hash (2 per
 * slot), followed by the open-addressing index: pairs of (hash, ring slot + 1),
 * 0 = empty, linear probing, a power of two of pairs, at least twice the
 * capacity. Keeping the hash in the index makes a probe read one place.
 * Few objects per session: typed arrays past a small size keep their bytes
 * outside the heap, each with its own bookkeeping.
 */
export class DedupeTable {
  private ids: string[];
  private names: string[];
  private nums: Float64Array;
  private ints: Int32Array;
  /** Ring slots: filled in order until `count` reaches `max`, then `next` is the oldest. */
  private capacity: number;
  private indexStart: number;
  private indexMask: number;
  private count = 0;
  private next = 0;

  constructor(readonly max: number) {
    assert(Number.isSafeInteger(max) && max >= 1, 'a dedupe table remembers at least one request');
    const capacity = Math.min(max, INITIAL_CAPACITY);
    const indexLength = indexLengthFor(capacity);
    this.capacity = capacity;
    this.ids = new Array<string>(capacity).fill('');
    this.names = new Array<string>(capacity).fill('');
    this.nums = new Float64Array(2 * capacity);
    this.ints = new Int32Array(2 * capacity + 2 * indexLength);
    this.indexStart = 2 * capacity;
    this.indexMask = indexLength - 1;
  }

  get size(): number {
    return this.count;
  }

  /** The ring slot of `requestId` (whose dedupeHash is `h`), or -1. */
  find(requestId: string, h: number): number {
    const ints = this.ints;
    const start = this.indexStart;
    const mask = this.indexMask;
    for (let p = h & mask; ; p = (p + 1) & mask) {
      const at = start + 2 * p;
      const v = ints[at + 1] as number;
      if (v === 0) return -1;
      if (ints[at] === h && this.ids[v - 1] === requestId) return v - 1;
    }
  }

  /**
   * Remembers a request id that is not in the table (the caller looked it
   * up first), evicting the oldest once `max` are remembered. Returns its slot.
   */
  add(requestId: string, h: number, status: number, name: string, token: number, revision: number, reason: number): number {
    let slot: number;
    if (this.count < this.max) {
      if (this.count === this.capacity) this.grow();
      slot = this.count++;
    } else {
      slot = this.next;
      this.next = slot + 1 === this.max ? 0 : slot + 1;
      this.unindex(slot);
    }
    this.ids[slot] = requestId;
    this.names[slot] = name;
    this.nums[2 * slot] = token;
    this.nums[2 * slot + 1] = revision;
    this.ints[2 * slot] = status | (reason << 2);
    this.ints[2 * slot + 1] = h;
    this.place(h, slot);
    return slot;
  }

  /** A QUEUED request left the queue: granted (with its token) or timed out (with a reason). */
  settle(slot: number, status: number, token: number, revision: number, reason: number): void {
    this.nums[2 * slot] = token;
    this.nums[2 * slot + 1] = revision;
    this.ints[2 * slot] = status | (reason << 2);
  }

  requestIdAt(slot: number): string {
    return this.ids[slot] as string;
  }

  nameAt(slot: number): string {
    return this.names[slot] as string;
  }

  statusCodeAt(slot: number): number {
    return (this.ints[2 * slot] as number) & 3;
  }

  statusAt(slot: number): DedupeStatus {
    return STATUS_OF[this.statusCodeAt(slot)] as DedupeStatus;
  }

  reasonCodeAt(slot: number): number {
    return (this.ints[2 * slot] as number) >> 2;
  }

  reasonAt(slot: number): TimedOutReason | null {
    return REASON_OF[this.reasonCodeAt(slot)] as TimedOutReason | null;
  }

  tokenAt(slot: number): Revision {
    return this.nums[2 * slot] as Revision;
  }

  revisionAt(slot: number): Revision {
    return this.nums[2 * slot + 1] as Revision;
  }

  /** The slot of the k-th oldest remembered request (0 = oldest). */
  slotInArrivalOrder(k: number): number {
    if (this.count < this.max) return k;
    const slot = this.next + k;
    return slot >= this.max ? slot - this.max : slot;
  }

  /** Checks the index against the ring (for checkInvariants). */
  check(): void {
    assert(this.count <= this.max && this.count <= this.capacity, 'dedupe count within its capacity and max');
    assert(this.next === 0 || this.count === this.max, 'the ring wraps only when full');
    let indexed = 0;
    for (let p = 0; p <= this.indexMask; p++) {
      const v = this.ints[this.indexStart + 2 * p + 1] as number;
      if (v === 0) continue;
      indexed++;
      assert(
        v <= this.count && this.ints[this.indexStart + 2 * p] === dedupeHash(this.ids[v - 1] as string),
        "an index entry has its id's hash",
      );
    }
    assert(indexed === this.count, 'every remembered request is indexed once');
    for (let slot = 0; slot < this.count; slot++) {
      const id = this.ids[slot] as string;
      assert(this.ints[2 * slot + 1] === dedupeHash(id), 'stored hash matches its id');
      assert(this.find(id, dedupeHash(id)) === slot, 'each request id is found at its own slot (ids are distinct)');
      const status = this.statusCodeAt(slot);
      assert(status >= STATUS_GRANTED && status <= STATUS_TIMED_OUT, 'a known status');
      assert((status === STATUS_TIMED_OUT) === (this.reasonCodeAt(slot) !== REASON_NONE), 'a reason comes with TIMED_OUT and only with it');
    }
  }

  private place(h: number, slot: number): void {
    const ints = this.ints;
    const start = this.indexStart;
    const mask = this.indexMask;
    let p = h & mask;
    while (ints[start + 2 * p + 1] !== 0) p = (p + 1) & mask;
    ints[start + 2 * p] = h;
    ints[start + 2 * p + 1] = slot + 1;
  }

  /** Removes `slot` from the index (backward-shift deletion keeps every probe chain intact without tombstones). */
  private unindex(slot: number): void {
    const ints = this.ints;
    const start = this.indexStart;
    const mask = this.indexMask;
    let p = (ints[2 * slot + 1] as number) & mask;
    while (ints[start + 2 * p + 1] !== slot + 1) {
      assert(ints[start + 2 * p + 1] !== 0, 'an evicted request id was indexed');
      p = (p + 1) & mask;
    }
    let hole = p;
    for (let q = (p + 1) & mask; ; q = (q + 1) & mask) {
      const v = ints[start + 2 * q + 1] as number;
      if (v === 0) break;
      const h = ints[start + 2 * q] as number;
      // The entry at q may move back into the hole unless its home lies cyclically in (hole, q].
      if (((q - (h & mask)) & mask) >= ((q - hole) & mask)) {
        ints[start + 2 * hole] = h;
        ints[start + 2 * hole + 1] = v;
        hole = q;
      }
    }
    ints[start + 2 * hole] = 0;
    ints[start + 2 * hole + 1] = 0;
  }

  /** Doubles the ring's capacity (up to max) while it has not wrapped yet: slots keep their numbers. */
  private grow(): void {
    assert(this.next === 0 && this.count === this.capacity, 'a table grows only when full and before it wraps');
    const old = this.capacity;
    const capacity = Math.min(this.max, old * 2);
    const indexLength = indexLengthFor(capacity);
    const ids = new Array<string>(capacity).fill('');
    const names = new Array<string>(capacity).fill('');
    for (let i = 0; i < old; i++) {
      ids[i] = this.ids[i] as string;
      names[i] = this.names[i] as string;
    }
    const nums = new Float64Array(2 * capacity);
    nums.set(this.nums);
    const ints = new Int32Array(2 * capacity + 2 * indexLength);
    ints.set(this.ints.subarray(0, 2 * old));
    this.ids = ids;
    this.names = names;
    this.nums = nums;
    this.ints = ints;
    this.capacity = capacity;
    this.indexStart = 2 * capacity;
    this.indexMask = indexLength - 1;
    for (let slot = 0; slot < this.count; slot++) this.place(ints[2 * slot + 1] as number, slot);
  }
}

/** A power of two at least twice `capacity`: probe chains stay short at a load of one half or less. */
function indexLengthFor(capacity: number): number {
  let n = 8;
  while (n < capacity * 2) n *= 2;
  return n;
}

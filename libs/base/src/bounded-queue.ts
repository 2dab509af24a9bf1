import { assert } from './assert.js';

/**
 * A FIFO queue with a hard capacity: every queue that grows with client input
 * has a limit, and a full queue is answered (RESOURCE_EXHAUSTED), not grown.
 * Ring buffer, so push and shift are O(1).
 */
export class BoundedQueue<T> {
  private items: (T | undefined)[];
  private head = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    assert(Number.isSafeInteger(capacity) && capacity > 0, `queue capacity must be a positive integer, got ${capacity}`);
    this.items = new Array<T | undefined>(Math.min(capacity, 16));
  }

  get length(): number {
    return this.count;
  }

  isFull(): boolean {
    return this.count === this.capacity;
  }

  /** Appends an item; returns false (and keeps the queue unchanged) when full. */
  push(item: T): boolean {
    if (this.count === this.capacity) return false;
    if (this.count === this.items.length) this.grow();
    this.items[(this.head + this.count) % this.items.length] = item;
    this.count++;
    return true;
  }

  shift(): T | undefined {
    if (this.count === 0) return undefined;
    const item = this.items[this.head];
    this.items[this.head] = undefined;
    this.head = (this.head + 1) % this.items.length;
    this.count--;
    return item;
  }

  peek(): T | undefined {
    return this.count === 0 ? undefined : this.items[this.head];
  }

  clear(): void {
    this.items = new Array<T | undefined>(Math.min(this.capacity, 16));
    this.head = 0;
    this.count = 0;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.count; i++) yield this.items[(this.head + i) % this.items.length] as T;
  }

  private grow(): void {
    const size = Math.min(this.capacity, this.items.length * 2);
    const next = new Array<T | undefined>(size);
    for (let i = 0; i < this.count; i++) next[i] = this.items[(this.head + i) % this.items.length];
    this.items = next;
    this.head = 0;
  }
}

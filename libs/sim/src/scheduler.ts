/**
 * Virtual time. Events run in order of (time, sequence number), so two
 * events at the same instant run in the order they were scheduled and a seed
 * fixes the whole run. Time is in integer microseconds.
 */
import { AssertionError, assert } from '@fencer/base';
import { Hasher } from './hash.js';

interface Event {
  readonly timeUs: number;
  readonly seq: number;
  /** Mixed into the trace hash when the event runs (kind and node, packed by the caller). */
  readonly tag: number;
  readonly run: () => void;
}

export class Scheduler {
  private nowUs = 0;
  private seq = 0;
  private readonly heap: Event[] = [];
  private executed = 0;
  readonly trace = new Hasher();

  get now(): number {
    return this.nowUs;
  }

  get eventsRun(): number {
    return this.executed;
  }

  get pending(): number {
    return this.heap.length;
  }

  at(timeUs: number, tag: number, run: () => void): void {
    // Per event: the message is built only when the assertion fails.
    if (!(timeUs >= this.nowUs)) throw new AssertionError(`an event cannot be scheduled in the past (${timeUs} < ${this.nowUs})`);
    assert(Number.isSafeInteger(timeUs), 'event times are integer microseconds');
    this.push({ timeUs, seq: this.seq++, tag, run });
  }

  after(delayUs: number, tag: number, run: () => void): void {
    this.at(this.nowUs + Math.max(0, Math.round(delayUs)), tag, run);
  }

  /** Runs events up to and including endUs; returns false if stopped early by `stop`. */
  runUntil(endUs: number, stop?: () => boolean): boolean {
    while (this.heap.length > 0) {
      const top = this.heap[0] as Event;
      if (top.timeUs > endUs) break;
      this.pop();
      this.nowUs = top.timeUs;
      this.executed++;
      this.trace.num(top.timeUs).word(top.tag);
      top.run();
      if (stop && stop()) return false;
    }
    this.nowUs = Math.max(this.nowUs, endUs);
    return true;
  }

  private push(ev: Event): void {
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(ev, h[parent] as Event)) break;
      h[i] = h[parent] as Event;
      i = parent;
    }
    h[i] = ev;
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop() as Event;
    if (h.length === 0) return;
    let i = 0;
    const n = h.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(h[r] as Event, h[l] as Event) ? r : l;
      if (!before(h[c] as Event, last)) break;
      h[i] = h[c] as Event;
      i = c;
    }
    h[i] = last;
  }
}

function before(a: Event, b: Event): boolean {
  return a.timeUs < b.timeUs || (a.timeUs === b.timeUs && a.seq < b.seq);
}

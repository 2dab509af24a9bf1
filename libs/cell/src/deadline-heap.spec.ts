/**
 * Goal: the deadline heap hands out entries in deadline order, ties in push
 * order, and only those due.
 * Method: random pushes against a sorted copy (fast-check).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DeadlineHeap } from './deadline-heap.js';

describe('DeadlineHeap', () => {
  it('pops only what is due, earliest first, ties in the order pushed', () => {
    const h = new DeadlineHeap<string>();
    h.push(30, 'c');
    h.push(10, 'a1');
    h.push(20, 'b');
    h.push(10, 'a2');
    expect(h.popDue(5)).toBeUndefined();
    const got: string[] = [];
    for (let e = h.popDue(20); e !== undefined; e = h.popDue(20)) got.push(e.item);
    expect(got).toEqual(['a1', 'a2', 'b']);
    expect(h.size).toBe(1);
    expect(h.popDue(30)?.item).toBe('c');
    expect(h.size).toBe(0);
  });

  it('agrees with sorting for any pushes and any cut-off', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 50 }), { maxLength: 200 }), fc.integer({ min: -1, max: 51 }), (times, now) => {
        const h = new DeadlineHeap<number>();
        times.forEach((t, i) => h.push(t, i));
        const popped: number[] = [];
        for (let e = h.popDue(now); e !== undefined; e = h.popDue(now)) popped.push(e.item);
        const expected = times
          .map((t, i) => ({ t, i }))
          .filter((x) => x.t <= now)
          .sort((a, b) => a.t - b.t || a.i - b.i)
          .map((x) => x.i);
        expect(popped).toEqual(expected);
        expect(h.size).toBe(times.length - expected.length);
      }),
    );
  });
});

/**
 * Goal: a waiter (a read, a batch of heartbeats) is answered only after a
 * ReadIndex round that began after it arrived; rounds are shared, never
 * overlapping, and when spaced never start closer together than the
 * spacing, nor later than needed; a round answered twice is a bug.
 * Method: a fake round function completed by hand, a fake clock and timer.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError } from '@fencer/base';
import { ReadIndexRounds } from './read-index-rounds.js';

describe('ReadIndexRounds', () => {
  it('answers waiters that arrive during a round only after the next round', () => {
    const rounds: ((e: Error | null) => void)[] = [];
    const c = new ReadIndexRounds((done) => rounds.push(done), 100);
    const answered: string[] = [];
    c.confirm(() => answered.push('a'));
    c.confirm(() => answered.push('b'));
    expect(rounds).toHaveLength(1);
    rounds[0]!(null);
    // 'b' arrived while round 1 was in flight, so it waits for round 2.
    expect(answered).toEqual(['a']);
    expect(rounds).toHaveLength(2);
    rounds[1]!(null);
    expect(answered).toEqual(['a', 'b']);
  });

  it('passes a failed round on to every waiter in it, and refuses beyond its limit', () => {
    const rounds: ((e: Error | null) => void)[] = [];
    const c = new ReadIndexRounds((done) => rounds.push(done), 2);
    const errors: (Error | null)[] = [];
    expect(c.confirm((e) => errors.push(e))).toBe(true);
    expect(c.confirm((e) => errors.push(e))).toBe(true);
    expect(c.confirm((e) => errors.push(e))).toBe(true);
    expect(c.confirm((e) => errors.push(e))).toBe(false);
    rounds[0]!(new Error('lost leadership'));
    expect(errors.map((e) => e?.message)).toEqual(['lost leadership']);
  });

  it('treats a round that completes twice as a bug (an assertion), not as a second answer', () => {
    const rounds: ((e: Error | null) => void)[] = [];
    const c = new ReadIndexRounds((done) => rounds.push(done), 10);
    const answered: string[] = [];
    c.confirm(() => answered.push('a'));
    rounds[0]!(null);
    expect(() => rounds[0]!(null)).toThrow(AssertionError);
    expect(answered).toEqual(['a']);
  });
});

describe('ReadIndexRounds with rounds spaced 5 ms apart', () => {
  function spaced() {
    const rounds: ((e: Error | null) => void)[] = [];
    const startedAt: number[] = [];
    const timers: { at: number; run: () => void }[] = [];
    let now = 1000;
    const c = new ReadIndexRounds(
      (done) => {
        startedAt.push(now);
        rounds.push(done);
      },
      100,
      { spacingMs: 5, nowMs: () => now, after: (ms, run) => timers.push({ at: now + ms, run }) },
    );
    const advanceTo = (t: number): void => {
      now = t;
      const due = timers.filter((x) => x.at <= t);
      timers.splice(0, timers.length, ...timers.filter((x) => x.at > t));
      for (const timer of due) timer.run();
    };
    return { c, rounds, startedAt, timers, advanceTo };
  }

  it('starts at once after a quiet spell, then no sooner than 5 ms after the previous start', () => {
    const { c, rounds, startedAt, timers, advanceTo } = spaced();
    const answered: string[] = [];
    c.confirm(() => answered.push('a'));
    expect(startedAt).toEqual([1000]);
    advanceTo(1001);
    c.confirm(() => answered.push('b'));
    rounds[0]!(null);
    expect(answered).toEqual(['a']);
    // 'b' waits for the spacing, not for another waiter.
    expect(rounds).toHaveLength(1);
    expect(timers.map((t) => t.at)).toEqual([1005]);
    advanceTo(1004);
    expect(rounds).toHaveLength(1);
    advanceTo(1005);
    expect(startedAt).toEqual([1000, 1005]);
    rounds[1]!(null);
    expect(answered).toEqual(['a', 'b']);
    // A waiter after a quiet spell longer than the spacing starts its round at once.
    advanceTo(1020);
    c.confirm(() => answered.push('c'));
    expect(startedAt).toEqual([1000, 1005, 1020]);
  });

  it('gathers every waiter that arrives while it waits into the one spaced round', () => {
    const { c, rounds, startedAt, advanceTo } = spaced();
    const answered: string[] = [];
    c.confirm(() => answered.push('a'));
    rounds[0]!(null);
    for (const h of ['b', 'c', 'd']) c.confirm(() => answered.push(h));
    expect(rounds).toHaveLength(1);
    advanceTo(1005);
    expect(rounds).toHaveLength(2);
    rounds[1]!(null);
    expect(answered).toEqual(['a', 'b', 'c', 'd']);
    expect(startedAt).toEqual([1000, 1005]);
  });
});

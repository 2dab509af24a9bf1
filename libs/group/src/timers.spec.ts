/**
 * Goal: a timer of any length fires once, at its full delay, and never hands
 * the environment a delay Node would turn into 1 ms (above 2^31 - 1 ms).
 * Method: a fake `after` on a virtual clock that records every delay it is
 * given; run a 30-day timer and a cancelled one to the end.
 */
import { describe, expect, it } from 'vitest';
import type { Cancel } from './env.js';
import { TIMER_DELAY_MS_MAX } from './limits.js';
import { afterChained } from './timers.js';

function fakeTimers() {
  let nowMs = 0;
  const delays: number[] = [];
  const queue: { atMs: number; run: () => void; live: boolean }[] = [];
  const after = (ms: number, run: () => void): Cancel => {
    delays.push(ms);
    const t = { atMs: nowMs + ms, run, live: true };
    queue.push(t);
    return () => (t.live = false);
  };
  const runAll = (): void => {
    for (let i = 0; i < 1000 && queue.length > 0; i++) {
      queue.sort((a, b) => a.atMs - b.atMs);
      const t = queue.shift()!;
      nowMs = t.atMs;
      if (t.live) t.run();
    }
  };
  return { after, runAll, delays, now: () => nowMs };
}

describe('afterChained', () => {
  it('holds a 30-day timer for 30 days in steps no longer than a Node timer allows', () => {
    const t = fakeTimers();
    const thirtyDaysMs = 30 * 24 * 3600 * 1000;
    const firedAt: number[] = [];
    afterChained(t.after, thirtyDaysMs, () => firedAt.push(t.now()));
    t.runAll();
    expect(firedAt).toEqual([thirtyDaysMs]);
    expect(Math.max(...t.delays)).toBeLessThanOrEqual(TIMER_DELAY_MS_MAX);
    expect(t.delays.length).toBe(Math.ceil(thirtyDaysMs / TIMER_DELAY_MS_MAX));
  });

  it('never fires once cancelled, in any step', () => {
    const t = fakeTimers();
    let fired = 0;
    const cancel = afterChained(t.after, 3 * TIMER_DELAY_MS_MAX, () => fired++);
    t.after(TIMER_DELAY_MS_MAX + 5, cancel);
    t.runAll();
    expect(fired).toBe(0);
  });

  it('fires a short timer once at its delay', () => {
    const t = fakeTimers();
    const firedAt: number[] = [];
    afterChained(t.after, 250, () => firedAt.push(t.now()));
    t.runAll();
    expect(firedAt).toEqual([250]);
  });
});

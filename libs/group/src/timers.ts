/**
 * Timers of any length over the environment's `after`, which takes at most
 * TIMER_DELAY_MS_MAX: a longer delay is chained in steps, so a queued
 * Acquire with a wait of days is held for days, not answered at once.
 */
import { assert } from '@fencer/base';
import type { Cancel } from './env.js';
import { TIMER_DELAY_MS_MAX } from './limits.js';

export type After = (ms: number, run: () => void) => Cancel;

export function afterChained(after: After, ms: number, run: () => void): Cancel {
  assert(ms >= 0 && Number.isFinite(ms), `a timer delay is a finite number of ms, got ${ms}`);
  let cancelled = false;
  let current: Cancel = () => {};
  const step = (left: number): void => {
    const now = Math.min(left, TIMER_DELAY_MS_MAX);
    current = after(now, () => {
      if (cancelled) return;
      if (left > now) step(left - now);
      else run();
    });
  };
  step(ms);
  return () => {
    cancelled = true;
    current();
  };
}

/**
 * Timers of any length over the environment's `after`, which takes at most
 * TIMER_DELAY_MS_MAX: a longer delay is chained in steps, so a wait of days
 * (a held Acquire, a routing long poll) lasts days, not 1 ms.
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

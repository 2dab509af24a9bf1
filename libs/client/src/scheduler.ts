/**
 * Time for the client: a monotonic clock plus timers. Production uses the
 * process's clocks; tests use `ManualScheduler` (in `@fencer/client/testing`)
 * to move time by hand and drive jeopardy and expiry deterministically.
 */
import type { Clock } from '@fencer/base';

/** Opaque: whatever the scheduler returned from setTimer. */
export type TimerHandle = object;

export interface Scheduler extends Clock {
  /** Runs fn once, delayMs from now on this scheduler's monotonic clock. */
  setTimer(fn: () => void, delayMs: number): TimerHandle;
  clearTimer(handle: TimerHandle): void;
}

/** The process's clocks: performance.now() is monotonic; Date.now() is only for humans. */
export const systemScheduler: Scheduler = {
  monoMs: () => performance.now(),
  wallMs: () => Date.now(),
  setTimer: (fn, delayMs) => setTimeout(fn, Math.max(0, delayMs)),
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Resolves after delayMs on the scheduler, or rejects with the signal's reason when it aborts first. */
export function sleep(scheduler: Scheduler, delayMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      scheduler.clearTimer(timer);
      reject(signal!.reason);
    };
    const timer = scheduler.setTimer(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, delayMs);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Shared helpers of the client tests: waiting for events (never for time). */
import type { EventEmitter } from 'node:events';

/** Resolves with the arguments of the first `event` for which pred holds; rejects after timeoutMs (a safety net, not a sleep). */
export function nextEvent<T extends unknown[]>(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any emitter, typed event map or not: Node's EventEmitter<T> is invariant in T
  emitter: EventEmitter<any>,
  event: string,
  pred: (...args: T) => boolean = () => true,
  timeoutMs = 10_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, on);
      reject(new Error(`no ${event} event within ${timeoutMs} ms`));
    }, timeoutMs);
    const on = (...args: unknown[]): void => {
      if (!pred(...(args as T))) return;
      clearTimeout(timer);
      emitter.off(event, on);
      resolve(args as T);
    };
    emitter.on(event, on);
  });
}

/** Lets pending I/O callbacks and promise jobs run (one macrotask turn) without moving any clock. */
export function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

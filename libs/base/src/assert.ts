/**
 * Assertions stay on in production (TigerBeetle style). A failed assertion is
 * a bug: the process must not continue with broken invariants, so callers at
 * the process edge log and exit non-zero when an AssertionError escapes.
 */
export class AssertionError extends Error {
  override readonly name = 'AssertionError';
}

export function assert(condition: unknown, message = 'assertion failed'): asserts condition {
  if (!condition) throw new AssertionError(message);
}

export function assertEqual<T>(actual: T, expected: T, what = 'value'): void {
  if (actual !== expected) {
    throw new AssertionError(`${what}: expected ${String(expected)}, got ${String(actual)}`);
  }
}

/** Marks a branch the type system proves unreachable (exhaustive switches). */
export function unreachable(value: never, what = 'value'): never {
  throw new AssertionError(`unreachable ${what}: ${JSON.stringify(value)}`);
}

/** Checks that n is a non-negative safe integer: the shape of every index, term and count. */
export function assertUint(n: number, what = 'value'): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new AssertionError(`${what} must be a non-negative safe integer, got ${n}`);
}

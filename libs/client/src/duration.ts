/**
 * Durations as people write them on command lines and in configs: "30s",
 * "500ms", "1m30s", "1.5h". A bare number means seconds, as for sleep(1),
 * timeout(1) and flock(1).
 */

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;
/** Longest duration accepted: 30 days, far beyond any wait or TTL, and a safe integer of milliseconds. */
export const DURATION_MS_MAX = 30 * 86_400_000;

/** Parses a duration into whole milliseconds (rounded up), or throws a RangeError a person can act on. */
export function parseDuration(text: string): number {
  const s = text.trim();
  if (s === '') throw new RangeError('a duration must not be empty (examples: 30s, 500ms, 1m30s)');
  let ms: number;
  if (/^\d+(?:\.\d+)?$/.test(s)) {
    ms = Number(s) * 1_000;
  } else {
    ms = 0;
    PART.lastIndex = 0;
    let parts = 0;
    while (PART.lastIndex < s.length) {
      const at = PART.lastIndex;
      const m = PART.exec(s);
      if (!m) throw new RangeError(`"${text}" is not a duration: unexpected "${s.slice(at)}" (examples: 30s, 500ms, 1m30s)`);
      ms += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
      parts++;
    }
    if (parts === 0) throw new RangeError(`"${text}" is not a duration (examples: 30s, 500ms, 1m30s)`);
  }
  const whole = Math.ceil(ms);
  if (!Number.isSafeInteger(whole) || whole > DURATION_MS_MAX) throw new RangeError(`"${text}" is longer than 30 days`);
  return whole;
}

/** The shortest exact rendering, e.g. 90000 → "1m30s", 1500 → "1s500ms", 0 → "0s". */
export function formatDuration(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`cannot format ${ms} ms as a duration`);
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
    ['ms', 1],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * size;
    }
  }
  return out;
}

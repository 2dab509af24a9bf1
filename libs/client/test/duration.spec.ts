/**
 * Goal: durations parse the way the CLI documents them ("30s", "500ms",
 * "1m30s", a bare number = seconds) and reject everything else with a
 * message; formatting is the exact inverse.
 * Method: examples for each form and error, plus a fast-check round trip
 * (format then parse gives the same milliseconds).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DURATION_MS_MAX, formatDuration, parseDuration } from '../src/index.js';

describe('parseDuration', () => {
  it.each([
    ['30s', 30_000],
    ['500ms', 500],
    ['0', 0],
    ['0s', 0],
    ['12', 12_000],
    ['1.5s', 1_500],
    ['2m', 120_000],
    ['1m30s', 90_000],
    ['1h', 3_600_000],
    ['1d2h', 93_600_000],
    ['1s500ms', 1_500],
    [' 10s ', 10_000],
    ['0.0005s', 1],
  ])('%s → %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', 's', '10x', '-5s', '5 s', '1m-2s', 'ten', '1e3', '31d', '1s2', 'ms'])('rejects %j', (text) => {
    expect(() => parseDuration(text)).toThrow(RangeError);
  });

  it('says what is wrong', () => {
    expect(() => parseDuration('10sx')).toThrow(/not a duration: unexpected "x"/);
    expect(() => parseDuration('31d')).toThrow(/longer than 30 days/);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [1, '1ms'],
    [90_000, '1m30s'],
    [1_500, '1s500ms'],
    [3_600_000, '1h'],
  ])('%d ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('round-trips through parseDuration', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: DURATION_MS_MAX }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
      { numRuns: 500 },
    );
  });
});

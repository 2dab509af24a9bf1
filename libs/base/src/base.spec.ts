/**
 * Goal: the foundations behave as their callers rely on.
 * Method: direct unit checks, plus fast-check properties for the PRNG and the queue.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AssertionError, BoundedQueue, ManualClock, SeededRandom, assert, findForbiddenTokens, findForeignImports } from './index.js';

describe('assert', () => {
  it('throws an AssertionError carrying the message when the condition is false', () => {
    expect(() => assert(false, 'commit index went backwards')).toThrow(AssertionError);
    expect(() => assert(0, 'x')).toThrow('x');
    expect(() => assert(true)).not.toThrow();
  });
});

describe('SeededRandom', () => {
  it('gives the same sequence for the same seed and different ones for different seeds', () => {
    const a = new SeededRandom(42);
    const b = new SeededRandom(42);
    const c = new SeededRandom(43);
    const sa = Array.from({ length: 20 }, () => a.nextU32());
    const sb = Array.from({ length: 20 }, () => b.nextU32());
    const sc = Array.from({ length: 20 }, () => c.nextU32());
    expect(sa).toEqual(sb);
    expect(sa).not.toEqual(sc);
  });

  it('keeps int() and range() within bounds', () => {
    fc.assert(
      fc.property(fc.integer(), fc.integer({ min: 1, max: 1_000_000 }), (seed, bound) => {
        const r = new SeededRandom(seed);
        for (let i = 0; i < 50; i++) {
          const v = r.int(bound);
          if (!(Number.isInteger(v) && v >= 0 && v < bound)) return false;
          const w = r.range(-3, 3);
          if (w < -3 || w > 3) return false;
        }
        return true;
      }),
    );
  });

  it('is roughly uniform (chi-square over 10 buckets)', () => {
    const r = new SeededRandom(7);
    const buckets = new Array<number>(10).fill(0);
    const n = 100_000;
    for (let i = 0; i < n; i++) buckets[r.int(10)]!++;
    const expected = n / 10;
    const chi = buckets.reduce((s, b) => s + (b - expected) ** 2 / expected, 0);
    expect(chi).toBeLessThan(27.9); // p = 0.001 for 9 degrees of freedom
  });

  it('forks into independent, reproducible streams', () => {
    const f1 = new SeededRandom(1).fork();
    const f2 = new SeededRandom(1).fork();
    expect(f1.nextU32()).toBe(f2.nextU32());
    const parent = new SeededRandom(1);
    const child = parent.fork();
    expect(child.nextU32()).not.toBe(parent.nextU32());
  });
});

describe('ManualClock', () => {
  it('moves only forward on the monotonic clock and skews only the wall clock', () => {
    const c = new ManualClock(100, 1000);
    c.advance(50);
    expect(c.monoMs()).toBe(150);
    expect(c.wallMs()).toBe(1150);
    c.skewWall(-500);
    expect(c.monoMs()).toBe(150);
    expect(c.wallMs()).toBe(650);
    expect(() => c.advance(-1)).toThrow(RangeError);
  });
});

describe('BoundedQueue', () => {
  it('refuses pushes beyond its capacity and stays FIFO (model check)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.array(fc.option(fc.integer(), { nil: undefined }), { maxLength: 200 }),
        (cap, ops) => {
          const q = new BoundedQueue<number>(cap);
          const model: number[] = [];
          for (const op of ops) {
            if (op === undefined) {
              expect(q.shift()).toBe(model.shift());
            } else {
              const accepted = q.push(op);
              expect(accepted).toBe(model.length < cap);
              if (accepted) model.push(op);
            }
            expect(q.length).toBe(model.length);
            expect([...q]).toEqual(model);
          }
        },
      ),
    );
  });
});

describe('purity scanner', () => {
  it('flags clocks, timers, randomness and node: imports, but not comments', () => {
    const src = [
      "import { x } from 'node:fs';",
      'const t = Date.now();',
      '// Date.now() in a comment is fine',
      'setTimeout(() => 1, 5);',
      'const r = Math.random();',
      'const ok = clock.monoMs();',
    ].join('\n');
    expect(findForbiddenTokens(src).map((h) => h.line)).toEqual([1, 2, 4, 5]);
  });

  it('flags third-party imports not on the allowed list', () => {
    const src = "import { a } from './a.js';\nimport { b } from '@fencer/base';\nimport pino from 'pino';";
    expect(findForeignImports(src, ['@fencer/base'])).toEqual([{ line: 3, text: 'pino' }]);
  });
});

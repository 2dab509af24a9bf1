/**
 * Goal: a seed that once failed stays fixed.
 * Method: replay every entry of regressions.json (its seed, its fault
 * profile, with no bug switch on) and expect no violation.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ReplicaBug } from '@fencer/replica';
import { BUGS, bugOptions, sweepOptions } from '../src/index.js';
import { expectClean } from './sweep.js';

interface Regression {
  seed: number;
  profile: string;
  seconds: number;
  found: string;
}

const file = fileURLToPath(new URL('../regressions.json', import.meta.url));
const regressions = (JSON.parse(readFileSync(file, 'utf8')) as { seeds: Regression[] }).seeds;

describe('regressions.json', () => {
  it('lists seeds with a known profile', () => {
    expect(regressions.length).toBeGreaterThan(0);
    for (const r of regressions) expect(r.profile === 'sweep' || BUGS.includes(r.profile as ReplicaBug)).toBe(true);
  });

  it.each(regressions.map((r) => [r.seed, r.profile, r] as const))('seed %i (%s) passes', (_seed, profile, r) => {
    if (profile === 'sweep') {
      expectClean(sweepOptions(r.seed, { seconds: r.seconds }));
    } else {
      expectClean({ ...bugOptions(profile as ReplicaBug, r.seed, { seconds: r.seconds }), bugs: {} }, undefined, profile);
    }
  });
});

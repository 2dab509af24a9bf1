/**
 * Goal: a heartbeat is answered only after a confirmation round that began
 * after it arrived; rounds are shared, never overlapping.
 * Method: a fake round function completed by hand.
 */
import { describe, expect, it } from 'vitest';
import { HeartbeatConfirmer } from '../src/heartbeat-confirmer.js';

describe('HeartbeatConfirmer', () => {
  it('answers heartbeats that arrive during a round only after the next round', () => {
    const rounds: ((e: Error | null) => void)[] = [];
    const c = new HeartbeatConfirmer((done) => rounds.push(done), 100);
    const answered: string[] = [];
    c.confirm(() => answered.push('a'));
    c.confirm(() => answered.push('b'));
    expect(rounds).toHaveLength(1);
    rounds[0]!(null);
    // 'b' arrived while round 1 was in flight, so it waits for round 2.
    expect(answered).toEqual(['a']);
    expect(rounds).toHaveLength(2);
    rounds[1]!(null);
    expect(answered).toEqual(['a', 'b']);
  });

  it('passes a failed round on to every heartbeat in it, and refuses beyond its limit', () => {
    const rounds: ((e: Error | null) => void)[] = [];
    const c = new HeartbeatConfirmer((done) => rounds.push(done), 2);
    const errors: (Error | null)[] = [];
    expect(c.confirm((e) => errors.push(e))).toBe(true);
    expect(c.confirm((e) => errors.push(e))).toBe(true);
    expect(c.confirm((e) => errors.push(e))).toBe(true);
    expect(c.confirm((e) => errors.push(e))).toBe(false);
    rounds[0]!(new Error('lost leadership'));
    expect(errors.map((e) => e?.message)).toEqual(['lost leadership']);
  });
});

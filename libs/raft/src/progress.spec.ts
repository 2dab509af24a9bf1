/**
 * Goal: the leader's per-follower flow control behaves as its states
 * promise: the in-flight ring bounds pipelining, probe sends one at a time,
 * stale rejections are ignored, and leaving snapshot state resumes after it.
 * Method: direct cases on Inflights and Progress.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError } from '@fencer/base';
import { Inflights, Progress } from './progress.js';

describe('Inflights', () => {
  it('fills to capacity, frees up to an acknowledged index, wraps around', () => {
    const f = new Inflights(3);
    f.add(1);
    f.add(2);
    f.add(5);
    expect(f.full()).toBe(true);
    expect(() => f.add(6)).toThrow(AssertionError);
    f.freeLE(2);
    expect([f.count, f.full()]).toEqual([1, false]);
    f.add(7);
    f.add(9);
    f.freeFirstOne();
    f.freeLE(8);
    expect(f.count).toBe(1);
    expect(() => f.add(8)).toThrow(AssertionError);
  });
});

describe('Progress', () => {
  it('probe pauses after one send; replicate pauses only when the window is full', () => {
    const p = new Progress(5, 2);
    expect(p.isPaused()).toBe(false);
    p.probeSent = true;
    expect(p.isPaused()).toBe(true);
    p.maybeUpdate(4);
    p.becomeReplicate();
    expect([p.next, p.isPaused()]).toEqual([5, false]);
    p.inflights.add(6);
    p.inflights.add(7);
    expect(p.isPaused()).toBe(true);
  });

  it('ignores stale rejections and backs off to the hint on a fresh one', () => {
    const p = new Progress(10, 4);
    expect(p.maybeDecrTo(5, 3)).toBe(false);
    expect(p.maybeDecrTo(9, 3)).toBe(true);
    expect(p.next).toBe(4);
    p.maybeUpdate(6);
    p.becomeReplicate();
    expect(p.maybeDecrTo(6, 0)).toBe(false);
    expect(p.maybeDecrTo(8, 0)).toBe(true);
    expect(p.next).toBe(7);
  });

  it('leaves snapshot state to resume after the snapshot', () => {
    const p = new Progress(1, 4);
    p.becomeSnapshot(50);
    expect(p.isPaused()).toBe(true);
    p.becomeProbe();
    expect([p.state, p.next]).toEqual(['probe', 51]);
  });
});

/**
 * Goal: the commit-monotonic checker fires when a replica's commit index goes
 * backwards within one life (sampled in memory) or comes back from a
 * restart below what was durable on its disk, and stays quiet when a restart
 * only forgets a commit that was never synced (etcd's MustSync).
 * Method: feed a Checkers object the calls the simulation makes.
 */
import { describe, expect, it } from 'vitest';
import { NodeId, Term } from '@fencer/base';
import { Checkers } from './checkers.js';

const n1 = NodeId('n1');
const hs = (commit: number) => ({ term: Term(3), vote: null, commit }) as never;

describe('commit-monotonic', () => {
  it('fires when the in-memory commit index goes backwards within one life', () => {
    const c = new Checkers(() => 0);
    c.recovered(n1, hs(0), 0);
    c.commitObserved(n1, 5);
    c.commitObserved(n1, 9);
    expect(c.violations).toEqual([]);
    c.commitObserved(n1, 7);
    expect(c.violations.map((v) => [v.checker, v.detail])).toEqual([
      ['commit-monotonic', "n1's commit index went from 9 to 7 within one life"],
    ]);
  });

  it('allows a restart below an unsynced commit, never below a durable one', () => {
    const c = new Checkers(() => 0);
    c.recovered(n1, hs(0), 0);
    c.durable(n1, hs(6));
    c.commitObserved(n1, 9); // 7..9 known in memory only: not synced on their own
    c.recovered(n1, hs(6), 0);
    c.commitObserved(n1, 6);
    expect(c.violations).toEqual([]);
    c.recovered(n1, hs(4), 0);
    expect(c.violations.map((v) => v.detail)).toEqual(['n1 recovered commit 4 after a durable 6']);
  });
});

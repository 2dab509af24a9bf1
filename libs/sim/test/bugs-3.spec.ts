/**
 * Goal: the fast path of decision 0021 (a follower that loses its leader's
 * connection pre-votes at once) is proven to be checked: its bug switch,
 * a follower that campaigns without pre-vote on connection loss, deposes
 * live leaders, and the leader-disrupted checker catches it within 200 seeds.
 * Method: seeds of the bug's profile (spurious connection resets only) until
 * the checker fires; the same profile with the bug off stays clean.
 */
import { describe, it } from 'vitest';
import { expectCaught, expectProfileClean } from './bugs.js';

const bug = 'campaignWithoutPreVoteOnConnectionLoss';

describe('the connection-loss bug switch is caught', () => {
  it(`${bug}: the leader-disrupted checker fires within 200 seeds`, () => expectCaught(bug));
  it(`${bug}: its profile with the bug off stays clean (5 seeds)`, () => expectProfileClean(bug, 5));
});

/**
 * Goal: with idleHeartbeatTicks, a leader heartbeats every heartbeatTicks
 * while it works and every idleHeartbeatTicks once it has appended nothing
 * and begun no read round for an election timeout; a proposal or a read
 * brings the short interval back at once. Without it, nothing changes.
 * Method: one node elected leader of three by hand (helpers.electLeader),
 * ticked one tick at a time; the heartbeats of each tick are counted from
 * its Readies. A config outside [heartbeatTicks, electionTicks) is refused.
 */
import { describe, expect, it } from 'vitest';
import { MessageType } from '../src/index.js';
import { ackAppend, drain, electLeader, newNode, ofType, type Handle } from './helpers.js';

const three = ['1', '2', '3'];
const ELECTION_TICKS = 10;

/** Ticks `n` times; returns the ticks (1-based) on which the leader sent heartbeats. */
function heartbeatTicks(h: Handle, n: number): number[] {
  const at: number[] = [];
  for (let t = 1; t <= n; t++) {
    h.node.tick();
    if (ofType(drain(h).messages, MessageType.Heartbeat).length > 0) at.push(t);
  }
  return at;
}

/** A leader of three whose blank entry is committed (both followers acknowledged it). */
function workingLeader(idleHeartbeatTicks?: number): Handle {
  const h = newNode({ id: '1', voters: three, electionTicks: ELECTION_TICKS, heartbeatTicks: 1, idleHeartbeatTicks });
  electLeader(h, three);
  const last = h.node.status().lastIndex;
  ackAppend(h, '2', last);
  ackAppend(h, '3', last);
  drain(h);
  return h;
}

describe('idle heartbeats', () => {
  it('heartbeats every tick while working, every idleHeartbeatTicks once idle for an election timeout', () => {
    const h = workingLeader(3);
    // The blank entry was appended at election: the first election timeout still counts as working.
    expect(heartbeatTicks(h, ELECTION_TICKS - 1)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(heartbeatTicks(h, 12)).toEqual([3, 6, 9, 12]);
  });

  it('returns to every tick at once after a proposal or a read round', () => {
    const h = workingLeader(3);
    heartbeatTicks(h, 2 * ELECTION_TICKS);
    expect(h.node.propose(new TextEncoder().encode('x'))).not.toBeNull();
    drain(h);
    expect(heartbeatTicks(h, 4)).toEqual([1, 2, 3, 4]);
    heartbeatTicks(h, 2 * ELECTION_TICKS);
    expect(h.node.readIndex('r1')).toBe(true);
    drain(h);
    expect(heartbeatTicks(h, 3)).toEqual([1, 2, 3]);
  });

  it('keeps heartbeatTicks when idleHeartbeatTicks is absent', () => {
    const h = workingLeader(undefined);
    expect(heartbeatTicks(h, 3 * ELECTION_TICKS)).toHaveLength(3 * ELECTION_TICKS);
  });

  it('refuses idleHeartbeatTicks below heartbeatTicks or not below electionTicks', () => {
    expect(() => newNode({ id: '1', voters: three, heartbeatTicks: 2, idleHeartbeatTicks: 1 })).toThrow(/idleHeartbeatTicks/);
    expect(() => newNode({ id: '1', voters: three, electionTicks: 10, idleHeartbeatTicks: 10 })).toThrow(/idleHeartbeatTicks/);
  });
});

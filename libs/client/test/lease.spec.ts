/**
 * Goal: the local lease (Chubby §2.8) never outlives the server's view of
 * the session, enters jeopardy exactly at its deadline, and ends safe or
 * expired as the issue specifies.
 * Method: examples against the pure Lease class with explicit instants, and
 * a fast-check property: for any heartbeat history in which each answer is
 * computed by a server after the heartbeat was sent (and the server's clock
 * runs up to 500 ppm slower than the client's), the client's lease deadline
 * is never later, on the client's clock, than the server's expiry deadline.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CLIENT_DEFAULTS, Lease, leaseMarginMs } from '../src/index.js';

const config = { ttlMs: 12_000, gracePeriodMs: 45_000, driftPpm: 500, driftMarginMs: 100 };

describe('Lease', () => {
  it('margin is 500 ppm of the TTL, rounded up, plus the fixed margin', () => {
    expect(leaseMarginMs(12_000, 500, 100)).toBe(6 + 100);
    expect(leaseMarginMs(1_001, 500, 0)).toBe(1);
    expect(() => leaseMarginMs(12_000, 499, 100)).toThrow(/at least 500/);
  });

  it('starts safe, with a deadline measured from when OpenSession was sent', () => {
    const lease = new Lease(config, 1_000);
    expect(lease.state).toBe('safe');
    expect(lease.deadlineMonoMs).toBe(1_000 + 12_000 - 106);
  });

  it('a renewal counts from the heartbeat send time, not its arrival', () => {
    const lease = new Lease(config, 0);
    expect(lease.renew(4_000, 12_000, 4_900)).toBeUndefined();
    expect(lease.deadlineMonoMs).toBe(4_000 + 12_000 - 106);
    expect(lease.renewedFromMonoMs).toBe(4_000);
  });

  it('an older answer never shortens the lease', () => {
    const lease = new Lease(config, 0);
    lease.renew(8_000, 12_000, 8_010);
    lease.renew(4_000, 12_000, 8_020);
    expect(lease.deadlineMonoMs).toBe(8_000 + 12_000 - 106);
  });

  it('enters jeopardy exactly at the deadline, then expires at the end of the grace period', () => {
    const lease = new Lease(config, 0);
    const d = lease.deadlineMonoMs;
    expect(lease.tick(d - 1)).toBeUndefined();
    expect(lease.tick(d)).toBe('jeopardy');
    expect(lease.graceEndMonoMs).toBe(d + 45_000);
    expect(lease.tick(d + 44_999)).toBeUndefined();
    expect(lease.tick(d + 45_000)).toBe('expired');
    expect(lease.tick(d + 90_000)).toBeUndefined();
    expect(lease.state).toBe('expired');
  });

  it('a late tick still dates the grace period from the deadline', () => {
    const lease = new Lease(config, 0);
    const d = lease.deadlineMonoMs;
    expect(lease.tick(d + 5_000)).toBe('jeopardy');
    expect(lease.graceEndMonoMs).toBe(d + 45_000);
  });

  it('a renewal in jeopardy that leaves lease time makes it safe', () => {
    const lease = new Lease(config, 0);
    const d = lease.deadlineMonoMs;
    lease.tick(d);
    // Sent before the deadline, answered long after: sent + 12 s - margin is already past → stays in jeopardy.
    expect(lease.renew(100, 12_000, 20_000)).toBeUndefined();
    expect(lease.state).toBe('jeopardy');
    expect(lease.renew(19_000, 12_000, 20_000)).toBe('safe');
    expect(lease.deadlineMonoMs).toBe(19_000 + 12_000 - 106);
  });

  it('expire() ends it for good', () => {
    const lease = new Lease(config, 0);
    expect(lease.expire()).toBe('expired');
    expect(lease.expire()).toBeUndefined();
    expect(lease.renew(10, 12_000, 20)).toBeUndefined();
    expect(lease.state).toBe('expired');
  });

  it('defaults keep a lease shorter than the grace period', () => {
    expect(CLIENT_DEFAULTS.gracePeriodMs).toBeGreaterThan(CLIENT_DEFAULTS.ttlMs);
  });

  it('property: the local deadline never passes the server deadline (server clock up to 500 ppm slow)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2_000, max: 60_000 }),
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 0, max: 20_000 }),
            delayMs: fc.integer({ min: 0, max: 5_000 }),
            rttRestMs: fc.integer({ min: 0, max: 5_000 }),
          }),
          { minLength: 1, maxLength: 30 },
        ),
        fc.integer({ min: 0, max: 500 }),
        (ttlMs, beats, slowPpm) => {
          // Real time t; client mono = t; server mono = t * (1 - slowPpm/1e6) (it runs slow, the dangerous direction).
          const serverClock = (t: number): number => t * (1 - slowPpm / 1e6);
          const lease = new Lease({ ttlMs, gracePeriodMs: 45_000, driftPpm: 500, driftMarginMs: 0 }, 0);
          let serverDeadline = serverClock(0) + ttlMs; // server mono
          let t = 0;
          for (const b of beats) {
            t += b.gapMs;
            const sent = t;
            const atServer = sent + b.delayMs;
            // The server expires the session if its deadline passed before this heartbeat arrived.
            if (serverClock(atServer) >= serverDeadline) break;
            serverDeadline = serverClock(atServer) + ttlMs;
            const remaining = Math.floor(serverDeadline - serverClock(atServer));
            const answeredAt = atServer + b.rttRestMs;
            lease.renew(sent, remaining, answeredAt);
            t = answeredAt;
            // Convert the server deadline to real time (= client mono) and compare.
            const serverDeadlineReal = serverDeadline / (1 - slowPpm / 1e6);
            expect(lease.deadlineMonoMs).toBeLessThanOrEqual(serverDeadlineReal);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

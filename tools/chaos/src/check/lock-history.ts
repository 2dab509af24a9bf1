/**
 * From the recorded history to the per-lock model events (lock-model.ts):
 * each client operation on a lock name becomes its events, and each session
 * that touched the name contributes its end.
 *
 * A session's end has a window too. It cannot come before its close was
 * invoked, nor (for an expiry) before TTL after the send time of the last
 * heartbeat the leader acknowledged (docs/architecture.md, "Promises", on
 * expiry: never before);
 * whichever is earlier. It must come before the client first learned of it
 * (a close answered, SESSION_NOT_FOUND, KeepAlive's expired); when the
 * client never learned, the end is optional. A window that is empty is an
 * early expiry, reported on its own.
 *
 * "Never before" is judged by the leader's monotonic clock, the contract's
 * clock. A leader whose clock runs at rate R (faketime's xR) lets TTL pass
 * in TTL/R of real time, so the real-time bound divides the TTL by the
 * highest rate among the replicas that led between the last acknowledged
 * heartbeat and the end (the run records leaders and their rates), and
 * allows the drift the client library allows (libs/client's leaseMarginMs).
 */
import type { History, Op } from '../history.js';
import { CLIENT_DEFAULTS, leaseMarginMs } from '@fencer/client';
import type { LockEvent, RequestExpectation } from './lock-model.js';

export interface SessionWindow {
  readonly s: string;
  readonly start: number;
  readonly end: number;
  readonly ttl: number;
  /** The bound from heartbeats alone (for the early-expiry report). */
  readonly expiryNotBefore: number;
  readonly closeInvoked: number;
}

/** Who led when, at what clock rate: the contract's clock, as seen from real time. */
export interface ExpiryClock {
  /** Highest clock rate of any replica that led at some time in [fromMs, toMs] (history times); 1 when all ran at the real rate. */
  rateMax(fromMs: number, toMs: number): number;
  /** The clock drift the contract allows over one TTL, in ms. */
  driftMs(ttlMs: number): number;
}

/** Every leader at the real rate, the client library's default drift allowance. */
export const REAL_RATE_CLOCK: ExpiryClock = {
  rateMax: () => 1,
  driftMs: (ttlMs) => leaseMarginMs(ttlMs, CLIENT_DEFAULTS.driftPpm, CLIENT_DEFAULTS.driftMarginMs),
};

/** A leader timeline sampled by the run: at `t` (history time) `leader` led with its clock at `rate`. */
export interface LeaderSample {
  readonly t: number;
  readonly leader: string;
  readonly rate: number;
}

/**
 * An ExpiryClock from leader samples: a sample's rate counts from the sample
 * before it to the one after it (a leader may have started between samples).
 */
export function leaderTimelineClock(samples: readonly LeaderSample[], base: ExpiryClock = REAL_RATE_CLOCK): ExpiryClock {
  const sorted = [...samples].sort((a, b) => a.t - b.t);
  return {
    rateMax(fromMs, toMs) {
      let rate = 1;
      for (let i = 0; i < sorted.length; i++) {
        const lo = i > 0 ? sorted[i - 1]!.t : -Infinity;
        const hi = i + 1 < sorted.length ? sorted[i + 1]!.t : Infinity;
        if (hi >= fromMs && lo <= toMs) rate = Math.max(rate, sorted[i]!.rate);
      }
      return rate;
    },
    driftMs: base.driftMs,
  };
}

export interface LockHistories {
  readonly byName: Map<string, LockEvent[]>;
  readonly expectations: Map<string, RequestExpectation>;
  readonly sessions: Map<string, SessionWindow>;
  /** Sessions whose end the client saw before the server may expire them. */
  readonly earlyEnds: SessionWindow[];
  /** Operations answered with a definite failure other than SESSION_NOT_FOUND (a client or server bug). */
  readonly oddFailures: Op[];
}

export function sessionWindows(history: History, clock: ExpiryClock = REAL_RATE_CLOCK): Map<string, SessionWindow> {
  const open = new Map<string, { inv: number; ttl: number }>();
  const closeInv = new Map<string, number>();
  const seen = new Map<string, number>();
  const saw = (s: string, t: number): void => {
    if (t < (seen.get(s) ?? Infinity)) seen.set(s, t);
  };
  for (const o of history.ops) {
    if (o.op.f === 'open' && o.outcome === 'ok' && o.r?.f === 'open') open.set(o.r.s, { inv: o.inv, ttl: o.r.ttl });
    if (o.op.f === 'close') {
      closeInv.set(o.op.s, Math.min(closeInv.get(o.op.s) ?? Infinity, o.inv));
      if (o.outcome !== 'unk') saw(o.op.s, o.comp);
    }
    if (o.outcome === 'fail' && o.code === 'SESSION_NOT_FOUND' && 's' in o.op) saw(o.op.s, o.comp);
  }
  const out = new Map<string, SessionWindow>();
  for (const [s, { inv, ttl }] of open) {
    const facts = history.sessions.get(s);
    if (facts && facts.endSeenMs < Infinity) saw(s, facts.endSeenMs);
    const lastAlive = Math.max(inv, facts?.lastAckedSendMs ?? -Infinity);
    const end = seen.get(s) ?? Infinity;
    const expiryNotBefore = lastAlive + ttl / clock.rateMax(lastAlive, Math.min(end, lastAlive + ttl)) - clock.driftMs(ttl);
    const closeInvoked = closeInv.get(s) ?? Infinity;
    out.set(s, { s, start: Math.min(closeInvoked, expiryNotBefore), end, ttl, expiryNotBefore, closeInvoked });
  }
  return out;
}

export function buildLockHistories(history: History, clock: ExpiryClock = REAL_RATE_CLOCK): LockHistories {
  const sessions = sessionWindows(history, clock);
  const byName = new Map<string, LockEvent[]>();
  const expectations = new Map<string, RequestExpectation>();
  const touched = new Map<string, Set<string>>();
  const oddFailures: Op[] = [];
  const grants = new Set<string>();
  const add = (name: string, e: LockEvent): void => {
    let list = byName.get(name);
    if (!list) {
      list = [];
      byName.set(name, list);
    }
    list.push(e);
    if (e.s !== null) {
      let t = touched.get(name);
      if (!t) {
        t = new Set();
        touched.set(name, t);
      }
      t.add(e.s);
    }
  };
  history.ops.forEach((o, op) => {
    const a = o.op;
    if (o.outcome === 'fail' && o.code !== 'SESSION_NOT_FOUND') {
      if (a.f === 'acquire' || a.f === 'release' || a.f === 'get') oddFailures.push(o);
      return;
    }
    // SESSION_NOT_FOUND: the session ended before the answer; the request may have taken effect before that.
    const unknown = o.outcome !== 'ok';
    const base = { start: o.inv, op };
    if (a.f === 'acquire') {
      const r = o.r?.f === 'acquire' ? o.r : undefined;
      if (unknown || !r || r.status === 'QUEUED') {
        add(a.name, {
          ...base,
          kind: 'enq',
          s: a.s,
          req: a.req,
          mode: a.mode,
          wait: a.wait,
          expect: 'unknown',
          token: 0,
          end: Infinity,
          optional: true,
          known: null,
        });
        if (a.wait > 0) add(a.name, { ...base, kind: 'cancel', s: a.s, req: a.req, end: Infinity, optional: true, known: null });
        return;
      }
      const end = o.comp;
      if (r.status === 'GRANTED') {
        expectations.set(a.req, r.token);
        // A re-acquire of a held lock answers the old grant: its token is not this request's revision.
        const grantKey = `${a.name} ${a.s} ${r.token}`;
        const repeat = grants.has(grantKey);
        grants.add(grantKey);
        add(a.name, {
          ...base,
          kind: 'enq',
          s: a.s,
          req: a.req,
          mode: a.mode,
          wait: a.wait,
          expect: 'granted',
          token: r.token,
          end,
          optional: false,
          known: a.wait === 0 && !repeat ? r.token : null,
        });
        if (a.wait > 0) add(a.name, { ...base, kind: 'confirm', s: a.s, req: a.req, token: r.token, end, optional: false, known: null });
      } else if (a.wait === 0) {
        expectations.set(a.req, 'never');
        add(a.name, {
          ...base,
          kind: 'enq',
          s: a.s,
          req: a.req,
          mode: a.mode,
          wait: 0,
          expect: 'busy',
          token: 0,
          end,
          optional: false,
          known: r.rev,
        });
      } else {
        expectations.set(a.req, 'never');
        add(a.name, {
          ...base,
          kind: 'enq',
          s: a.s,
          req: a.req,
          mode: a.mode,
          wait: a.wait,
          expect: 'queued',
          token: 0,
          end,
          optional: false,
          known: null,
        });
        add(a.name, { ...base, kind: 'cancel', s: a.s, req: a.req, end, optional: false, known: r.rev });
      }
    } else if (a.f === 'release') {
      const r = o.r?.f === 'release' ? o.r : undefined;
      const ambiguous = unknown || !r || (!r.released && r.retried);
      add(a.name, {
        ...base,
        kind: 'rel',
        s: a.s,
        token: a.token,
        expect: ambiguous ? 'unknown' : r!.released,
        end: ambiguous ? Infinity : o.comp,
        optional: ambiguous,
        known: null,
      });
    } else if (a.f === 'get' && o.outcome === 'ok' && o.r?.f === 'get') {
      add(a.name, {
        ...base,
        kind: 'read',
        s: null,
        holders: o.r.holders,
        waiters: o.r.waiters,
        end: o.comp,
        optional: false,
        known: o.r.rev + 0.5,
      });
    }
  });
  const earlyEnds: SessionWindow[] = [];
  for (const w of sessions.values()) if (w.end < w.start) earlyEnds.push(w);
  for (const [name, ss] of touched) {
    for (const s of ss) {
      const w = sessions.get(s);
      // A session whose open answer was lost: its end may be any time after its first use.
      const start = w
        ? Math.min(w.start, w.end)
        : Math.min(
            ...byName
              .get(name)!
              .filter((e) => e.s === s)
              .map((e) => e.start),
          );
      const end = w?.end ?? Infinity;
      add(name, { kind: 'end', s, start, end, optional: end === Infinity, known: null, op: -1 });
    }
  }
  return { byName, expectations, sessions, earlyEnds, oddFailures };
}

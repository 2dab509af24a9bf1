/**
 * From the recorded history to the per-lock model events (lock-model.ts):
 * each client operation on a lock name becomes its events, and each session
 * that touched the name contributes its end.
 *
 * A session's end has a window too. It cannot come before its close was
 * invoked, nor (for an expiry) before TTL after the send time of the last
 * heartbeat the leader acknowledged (ARCHITECTURE "Expiry": never before);
 * whichever is earlier. It must come before the client first learned of it
 * (a close answered, SESSION_NOT_FOUND, KeepAlive's expired); when the
 * client never learned, the end is optional. A window that is empty is an
 * early expiry, reported on its own.
 */
import type { History, Op } from '../history.js';
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

export interface LockHistories {
  readonly byName: Map<string, LockEvent[]>;
  readonly expectations: Map<string, RequestExpectation>;
  readonly sessions: Map<string, SessionWindow>;
  /** Sessions whose end the client saw before the server may expire them. */
  readonly earlyEnds: SessionWindow[];
  /** Operations answered with a definite failure other than SESSION_NOT_FOUND (a client or server bug). */
  readonly oddFailures: Op[];
}

export function sessionWindows(history: History): Map<string, SessionWindow> {
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
    const expiryNotBefore = lastAlive + ttl;
    const closeInvoked = closeInv.get(s) ?? Infinity;
    out.set(s, { s, start: Math.min(closeInvoked, expiryNotBefore), end: seen.get(s) ?? Infinity, ttl, expiryNotBefore, closeInvoked });
  }
  return out;
}

export function buildLockHistories(history: History): LockHistories {
  const sessions = sessionWindows(history);
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
        add(a.name, { ...base, kind: 'enq', s: a.s, req: a.req, mode: a.mode, wait: a.wait, expect: 'unknown', token: 0, end: Infinity, optional: true, known: null });
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
        add(a.name, { ...base, kind: 'enq', s: a.s, req: a.req, mode: a.mode, wait: a.wait, expect: 'granted', token: r.token, end, optional: false, known: a.wait === 0 && !repeat ? r.token : null });
        if (a.wait > 0) add(a.name, { ...base, kind: 'confirm', s: a.s, req: a.req, token: r.token, end, optional: false, known: null });
      } else if (a.wait === 0) {
        expectations.set(a.req, 'never');
        add(a.name, { ...base, kind: 'enq', s: a.s, req: a.req, mode: a.mode, wait: 0, expect: 'busy', token: 0, end, optional: false, known: r.rev });
      } else {
        expectations.set(a.req, 'never');
        add(a.name, { ...base, kind: 'enq', s: a.s, req: a.req, mode: a.mode, wait: a.wait, expect: 'queued', token: 0, end, optional: false, known: null });
        add(a.name, { ...base, kind: 'cancel', s: a.s, req: a.req, end, optional: false, known: r.rev });
      }
    } else if (a.f === 'release') {
      const r = o.r?.f === 'release' ? o.r : undefined;
      const ambiguous = unknown || !r || (!r.released && r.retried);
      add(a.name, { ...base, kind: 'rel', s: a.s, token: a.token, expect: ambiguous ? 'unknown' : r!.released, end: ambiguous ? Infinity : o.comp, optional: ambiguous, known: null });
    } else if (a.f === 'get' && o.outcome === 'ok' && o.r?.f === 'get') {
      add(a.name, { ...base, kind: 'read', s: null, holders: o.r.holders, waiters: o.r.waiters, end: o.comp, optional: false, known: o.r.rev + 0.5 });
    }
  });
  const earlyEnds: SessionWindow[] = [];
  for (const w of sessions.values()) if (w.end < w.start) earlyEnds.push(w);
  for (const [name, ss] of touched) {
    for (const s of ss) {
      const w = sessions.get(s);
      // A session whose open answer was lost: its end may be any time after its first use.
      const start = w ? Math.min(w.start, w.end) : Math.min(...byName.get(name)!.filter((e) => e.s === s).map((e) => e.start));
      const end = w?.end ?? Infinity;
      add(name, { kind: 'end', s, start, end, optional: end === Infinity, known: null, op: -1 });
    }
  }
  return { byName, expectations, sessions, earlyEnds, oddFailures };
}

/**
 * The sequential model of one lock: a FIFO shared/exclusive lock with
 * sessions (docs/architecture.md, "Promises": FIFO fairness, shared promotion from the
 * head stopping at the first request it cannot grant, release with a stale
 * token is a no-op, session end releases holdings and cancels waits).
 *
 * A client operation becomes one or more model events, each with a real-time
 * window [start, end] in which it must take effect (end = Infinity and
 * `optional` when the outcome is unknown: it may take effect at any time
 * after start, or never):
 *   enq      an Acquire reaching the lock: granted at once, queued, or (a
 *            try-lock) answered busy;
 *   confirm  a waiting Acquire's GRANTED answer: the request holds the lock
 *            with that token (granted earlier by a promotion);
 *   cancel   a waiter leaving the queue (a wait that timed out or whose call
 *            was cancelled);
 *   rel      Release with a token;
 *   end      the session's end (close or expiry): every holding and wait of
 *            the session goes;
 *   read     GetLock: holders and waiters at a revision.
 *
 * Revisions prune the search ("pruned by tokens"): every entry of the cell's
 * log has its own revision, so events that report one (a grant's token, a
 * try-lock's or a cancel's decision, a read's revision) have a fixed place
 * in the order, `known`. A write at revision r sits at position r, a read at
 * r + 0.5 (it sees entry r). An event without one (a release, a session end)
 * floats; when it promotes a waiter whose GRANTED answer is known, it takes
 * that token as its revision ("binding").
 */
import { LIMITS } from '@fencer/lock-fsm';
import type { Mode } from '../history.js';

export interface Holder {
  readonly s: string;
  readonly req: string;
  readonly mode: Mode;
  /** null: granted by an event whose revision nobody reported (yet). */
  readonly token: number | null;
}

export interface Waiter {
  readonly s: string;
  readonly req: string;
  readonly mode: Mode;
}

export interface LockModelState {
  readonly holders: readonly Holder[];
  readonly waiters: readonly Waiter[];
  /** Position of the last event placed at a known revision. */
  readonly pos: number;
}

export const INITIAL_STATE: LockModelState = { holders: [], waiters: [], pos: 0 };

interface EventBase {
  readonly start: number;
  readonly end: number;
  readonly optional: boolean;
  /** Fixed position in the revision order, when the event reports one. */
  readonly known: number | null;
  readonly s: string | null;
  /** Index of the client operation (for reports), -1 for session ends. */
  readonly op: number;
}

export type LockEvent = EventBase &
  (
    | {
        readonly kind: 'enq';
        readonly s: string;
        readonly req: string;
        readonly mode: Mode;
        readonly wait: number;
        readonly expect: 'granted' | 'busy' | 'queued' | 'unknown';
        readonly token: number;
      }
    | { readonly kind: 'confirm'; readonly s: string; readonly req: string; readonly token: number }
    | { readonly kind: 'cancel'; readonly s: string; readonly req: string }
    | { readonly kind: 'rel'; readonly s: string; readonly token: number; readonly expect: boolean | 'unknown' }
    | { readonly kind: 'end'; readonly s: string }
    | {
        readonly kind: 'read';
        readonly holders: ReadonlyArray<readonly [string, number, Mode]>;
        readonly waiters: ReadonlyArray<readonly [string, Mode, string]>;
      }
  );

/** What a request's own answer says about its grant: the token, or that it was never granted. */
export type RequestExpectation = number | 'never';

export interface StepContext {
  /** Smallest known position among the other unplaced mandatory events (Infinity if none). */
  readonly nextKnown: number;
  readonly expectations: ReadonlyMap<string, RequestExpectation>;
  /**
   * Whether the session's end is already placed. Kept out of the state: it
   * follows from which events are placed, which the search tracks anyway.
   */
  readonly isDead: (s: string) => boolean;
}

const holdersMax = LIMITS.holdersPerLockMax;

export function stateKey(st: LockModelState): string {
  const h = st.holders.map((x) => `${x.s}@${x.token ?? '?'}/${x.mode}/${x.req}`).join(',');
  const w = st.waiters.map((x) => `${x.s}/${x.mode}/${x.req}`).join(',');
  return `${h}|${w}|${st.pos}`;
}

/** A floating event takes revision t: it must lie after the last placed revision and before the next known one. */
function canBind(t: number, st: LockModelState, ctx: StepContext): boolean {
  return t > st.pos && t < ctx.nextKnown;
}

/**
 * Grants from the head of the queue as the state machine does. `rev` is the
 * current event's revision when known; a promoted request whose answer says
 * GRANTED t binds it. Returns null when the promotion contradicts an answer.
 */
function promote(st: LockModelState, rev: number | null, ctx: StepContext): LockModelState | null {
  const waiters = st.waiters;
  let count = st.holders.length;
  let mode: Mode | undefined = st.holders[0]?.mode;
  let k = 0;
  while (k < waiters.length) {
    const w = waiters[k]!;
    if (!(count === 0 || (w.mode === 'S' && mode === 'S' && count < holdersMax))) break;
    mode = w.mode;
    count++;
    k++;
  }
  if (k === 0) return st;
  let bound = rev;
  let pos = st.pos;
  for (let i = 0; i < k; i++) {
    const exp = ctx.expectations.get(waiters[i]!.req);
    if (exp === 'never') return null;
    if (exp === undefined) continue;
    if (bound === null) {
      if (!canBind(exp, st, ctx)) return null;
      bound = exp;
      pos = exp;
    } else if (bound !== exp) {
      return null;
    }
  }
  const holders = [...st.holders];
  for (let i = 0; i < k; i++) {
    const w = waiters[i]!;
    holders.push({ s: w.s, req: w.req, mode: w.mode, token: bound });
  }
  return { holders, waiters: waiters.slice(k), pos };
}

function withPos(st: LockModelState, e: LockEvent): LockModelState {
  return e.known === null ? st : { ...st, pos: e.known };
}

/** The states the model may be in after `e` (none: the event cannot take effect here). */
export function step(st: LockModelState, e: LockEvent, ctx: StepContext): LockModelState[] {
  const s = e.s;
  if (s !== null && ctx.isDead(s)) {
    // A session that has ended changes nothing; only an unknown outcome is consistent with that.
    return e.optional ? [st] : [];
  }
  switch (e.kind) {
    case 'enq': {
      const held = st.holders.find((h) => h.s === e.s);
      if (held) {
        // Re-acquiring what the session holds answers the grant it has (a different mode is refused).
        if (e.expect === 'unknown') return [st];
        if (e.expect !== 'granted' || held.mode !== e.mode) return [];
        if (held.token === null) return [{ ...st, holders: st.holders.map((h) => (h === held ? { ...h, token: e.token } : h)) }];
        return held.token === e.token ? [st] : [];
      }
      if (st.waiters.some((w) => w.s === e.s)) return e.expect === 'unknown' ? [st] : [];
      const grantable =
        st.waiters.length === 0 &&
        (st.holders.length === 0 || (e.mode === 'S' && st.holders.every((h) => h.mode === 'S') && st.holders.length < holdersMax));
      if (grantable) {
        if (e.expect === 'busy' || e.expect === 'queued') return [];
        let token: number | null = e.known;
        let pos = st.pos;
        if (e.expect === 'granted') {
          if (token === null) {
            if (!canBind(e.token, st, ctx)) return [];
            token = e.token;
          } else if (token !== e.token) {
            return [];
          }
          pos = token;
        }
        return [{ ...st, holders: [...st.holders, { s: e.s, req: e.req, mode: e.mode, token }], pos }];
      }
      if (e.wait === 0) return e.expect === 'busy' || e.expect === 'unknown' ? [withPos(st, e)] : [];
      if (e.expect === 'busy') return [];
      return [{ ...st, waiters: [...st.waiters, { s: e.s, req: e.req, mode: e.mode }] }];
    }
    case 'confirm': {
      // By session, not request: a re-acquire of a held lock answers the grant the session has.
      const h = st.holders.find((x) => x.s === e.s);
      return h !== undefined && h.token === e.token ? [st] : [];
    }
    case 'cancel': {
      const at = st.waiters.findIndex((w) => w.s === e.s && w.req === e.req);
      if (at < 0) return e.optional ? [st] : [];
      const next = promote({ ...withPos(st, e), waiters: st.waiters.filter((_, i) => i !== at) }, e.known, ctx);
      return next ? [next] : [];
    }
    case 'rel': {
      const h = st.holders.find((x) => x.s === e.s);
      if (!h || (h.token !== null && h.token !== e.token)) return e.expect === true ? [] : [st];
      const out: LockModelState[] = [];
      if (e.expect !== false) {
        const next = promote({ ...st, holders: st.holders.filter((x) => x !== h) }, null, ctx);
        if (next) out.push(next);
      }
      // An unknown token may differ from the one released: then the release is a no-op.
      if (h.token === null && e.expect !== true) out.push(st);
      return out;
    }
    case 'end': {
      const next = promote(
        { holders: st.holders.filter((h) => h.s !== e.s), waiters: st.waiters.filter((w) => w.s !== e.s), pos: st.pos },
        null,
        ctx,
      );
      return next ? [next] : [];
    }
    case 'read': {
      if (e.holders.length !== st.holders.length || e.waiters.length !== st.waiters.length) return [];
      const holders: Holder[] = [];
      for (let i = 0; i < e.holders.length; i++) {
        const [hs, ht, hm] = e.holders[i]!;
        const m = st.holders[i]!;
        if (m.s !== hs || m.mode !== hm || (m.token !== null && m.token !== ht)) return [];
        holders.push(m.token === null ? { ...m, token: ht } : m);
      }
      for (let i = 0; i < e.waiters.length; i++) {
        const [ws, wm, wr] = e.waiters[i]!;
        const m = st.waiters[i]!;
        if (m.s !== ws || m.mode !== wm || m.req !== wr) return [];
      }
      return [{ ...st, holders, pos: e.known ?? st.pos }];
    }
  }
}

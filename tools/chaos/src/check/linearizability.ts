/**
 * Per-lock linearizability: a Wing–Gong search with Lowe's memo (a set of
 * visited (placed events, model state) pairs), over the model events of one
 * lock name (lock-model.ts). At each step it may place any unplaced event
 * whose window starts before the earliest end of an unplaced mandatory
 * event (real-time order), subject to the revision order: an event with a
 * known revision goes after the last placed one and not after the next known
 * one still unplaced. A session's end may only be placed once every
 * mandatory event of that session is placed (an ended session changes
 * nothing, and its answered requests did change something). Optional events
 * (unknown outcomes) may also never be placed.
 *
 * The memo keys the placed set by a Zobrist hash (two 32-bit words, random
 * per event, XORed in as events are placed): exact sets would make keys as
 * long as the history, since optional events that never take effect stay
 * unplaced. A collision could only prune a branch wrongly, with odds far
 * below one in 2^32 for the state counts the budget allows.
 *
 * Candidates are tried mandatory first, earliest deadline first, which finds
 * a linearization of a correct history almost without backtracking; a
 * violation makes the search exhaust the (memoised) space, bounded by a
 * state budget: running out of budget is reported as a checker timeout.
 */
import { SeededRandom } from '@fencer/base';
import { LINEARIZABILITY_STATES_MAX } from '../limits.js';
import { INITIAL_STATE, type LockEvent, type LockModelState, type RequestExpectation, stateKey, step } from './lock-model.js';

export interface LinearizabilityResult {
  readonly name: string;
  readonly ok: boolean;
  readonly timedOut: boolean;
  readonly events: number;
  readonly statesVisited: number;
  /** On failure: the most events placed on any path, and what could not be placed next. */
  readonly detail?: string;
}

interface Frame {
  readonly state: LockModelState;
  readonly placed: number;
  /** Every event (in start order) below `low` is placed or can no longer take effect. */
  readonly low: number;
  /** Zobrist hash of the placed set. */
  readonly h1: number;
  readonly h2: number;
  /** Where the first unplaced event may be in byEnd and byKnown (everything before is placed). */
  endPtr: number;
  knownPtr: number;
  cands: Array<{ e: number; st: LockModelState }> | null;
  next: number;
}

export function checkLock(
  name: string,
  eventsIn: readonly LockEvent[],
  expectations: ReadonlyMap<string, RequestExpectation>,
  statesMax = LINEARIZABILITY_STATES_MAX,
): LinearizabilityResult {
  const events = [...eventsIn].sort((a, b) => a.start - b.start);
  const n = events.length;
  const placed = new Uint8Array(n);
  const mandatoryLeft = new Map<string, number>();
  let mandatoryRemaining = 0;
  for (const e of events) {
    if (e.optional) continue;
    mandatoryRemaining++;
    if (e.s !== null && e.kind !== 'end') mandatoryLeft.set(e.s, (mandatoryLeft.get(e.s) ?? 0) + 1);
  }
  const byEnd = events
    .map((_, i) => i)
    .filter((i) => !events[i]!.optional)
    .sort((a, b) => events[a]!.end - events[b]!.end);
  const byKnown = events
    .map((_, i) => i)
    .filter((i) => !events[i]!.optional && events[i]!.known !== null)
    .sort((a, b) => events[a]!.known! - events[b]!.known!);

  const endOf = new Map<string, number>();
  events.forEach((e, i) => {
    if (e.kind === 'end') endOf.set(e.s, i);
  });
  const isDead = (s: string): boolean => {
    const i = endOf.get(s);
    return i !== undefined && placed[i] === 1;
  };
  const zr = new SeededRandom(n + 1);
  const z1 = Uint32Array.from({ length: n }, () => zr.nextU32());
  const z2 = Uint32Array.from({ length: n }, () => zr.nextU32());
  /** An event that will never be placed on this path: an unknown outcome of a session that has ended. */
  const retired = (i: number): boolean => {
    const e = events[i]!;
    return e.optional && e.s !== null && isDead(e.s);
  };

  const memo = new Set<string>();
  let states = 0;
  let deepest = -1;
  let deepestDetail = '';

  /** The first unplaced event of `order` from position `from` on (other than `skip`), and its position. */
  const firstUnplaced = (order: readonly number[], from: number, skip = -1): [event: number, at: number] => {
    for (let p = from; p < order.length; p++) {
      const i = order[p]!;
      if (!placed[i] && i !== skip) return [i, p];
    }
    return [-1, order.length];
  };

  const candidates = (st: LockModelState, f: Frame): Array<{ e: number; st: LockModelState }> => {
    const low = f.low;
    const [minEndAt, endPtr] = firstUnplaced(byEnd, f.endPtr);
    f.endPtr = endPtr;
    const minEnd = minEndAt < 0 ? Infinity : events[minEndAt]!.end;
    const [k0, knownPtr] = firstUnplaced(byKnown, f.knownPtr);
    f.knownPtr = knownPtr;
    const k1 = k0 < 0 ? -1 : firstUnplaced(byKnown, knownPtr, k0)[0];
    const knownAfter = (i: number): number => {
      const at = i === k0 ? k1 : k0;
      return at < 0 ? Infinity : events[at]!.known!;
    };
    const out: Array<{ e: number; st: LockModelState; mandatory: boolean; end: number }> = [];
    for (let i = low; i < n; i++) {
      const e = events[i]!;
      if (e.start > minEnd) break;
      if (placed[i]) continue;
      if (e.optional && e.s !== null && isDead(e.s)) continue;
      if (e.kind === 'end' && (mandatoryLeft.get(e.s) ?? 0) > 0) continue;
      const nextKnown = knownAfter(i);
      if (e.known !== null) {
        if (e.kind === 'read' ? e.known < st.pos : e.known <= st.pos) continue;
        if (e.known > nextKnown) continue;
      }
      for (const next of step(st, e, { nextKnown, expectations, isDead })) out.push({ e: i, st: next, mandatory: !e.optional, end: e.end });
    }
    out.sort((a, b) => (a.mandatory === b.mandatory ? a.end - b.end : a.mandatory ? -1 : 1));
    return out;
  };

  const lowAfter = (f: Frame, extra: number): number => {
    let low = f.low;
    while (low < n && (placed[low] || low === extra || retired(low))) low++;
    return low;
  };

  const stack: Frame[] = [{ state: INITIAL_STATE, placed: 0, low: 0, h1: 0, h2: 0, endPtr: 0, knownPtr: 0, cands: null, next: 0 }];
  const path: number[] = [];
  while (stack.length > 0) {
    const f = stack[stack.length - 1]!;
    if (f.cands === null) {
      if (mandatoryRemaining === 0) return { name, ok: true, timedOut: false, events: n, statesVisited: states };
      f.cands = candidates(f.state, f);
      if (f.placed > deepest) {
        deepest = f.placed;
        const blocking = firstUnplaced(byEnd, f.endPtr)[0];
        const b = blocking >= 0 ? events[blocking]! : undefined;
        deepestDetail =
          `placed ${f.placed} of ${n} events; state holders=[${f.state.holders.map((h) => `${h.s}@${h.token ?? '?'}/${h.mode}`).join(' ')}] ` +
          `waiters=[${f.state.waiters.map((w) => `${w.s}/${w.mode}/${w.req}`).join(' ')}] pos=${f.state.pos}; ` +
          `next mandatory by deadline: ${b ? describe(b) : 'none'}; ${f.cands.length} candidates`;
      }
    }
    if (f.next < f.cands.length) {
      const c = f.cands[f.next++]!;
      const h1 = (f.h1 ^ z1[c.e]!) >>> 0;
      const h2 = (f.h2 ^ z2[c.e]!) >>> 0;
      const key = `${h1.toString(36)}.${h2.toString(36)}#${stateKey(c.st)}`;
      if (memo.has(key)) continue;
      memo.add(key);
      if (++states > statesMax) {
        return {
          name,
          ok: false,
          timedOut: true,
          events: n,
          statesVisited: states,
          detail: `state budget ${statesMax} exhausted; deepest: ${deepestDetail}`,
        };
      }
      const e = events[c.e]!;
      placed[c.e] = 1;
      path.push(c.e);
      const low = lowAfter(f, -1);
      if (!e.optional) {
        mandatoryRemaining--;
        if (e.s !== null && e.kind !== 'end') mandatoryLeft.set(e.s, mandatoryLeft.get(e.s)! - 1);
      }
      stack.push({ state: c.st, placed: f.placed + 1, low, h1, h2, endPtr: f.endPtr, knownPtr: f.knownPtr, cands: null, next: 0 });
    } else {
      stack.pop();
      const i = path.pop();
      if (i === undefined) break;
      const e = events[i]!;
      placed[i] = 0;
      if (!e.optional) {
        mandatoryRemaining++;
        if (e.s !== null && e.kind !== 'end') mandatoryLeft.set(e.s, mandatoryLeft.get(e.s)! + 1);
      }
    }
  }
  return { name, ok: false, timedOut: false, events: n, statesVisited: states, detail: `no linearization; deepest: ${deepestDetail}` };
}

export function describe(e: LockEvent): string {
  const w = `[${e.start.toFixed(1)}, ${e.end === Infinity ? '∞' : e.end.toFixed(1)}]${e.known !== null ? ` @${e.known}` : ''}${e.optional ? ' optional' : ''}`;
  switch (e.kind) {
    case 'enq':
      return `acquire ${e.s} ${e.mode} wait=${e.wait} req=${e.req} expect=${e.expect}${e.expect === 'granted' ? ` t=${e.token}` : ''} ${w}`;
    case 'confirm':
      return `granted ${e.s} req=${e.req} t=${e.token} ${w}`;
    case 'cancel':
      return `cancel ${e.s} req=${e.req} ${w}`;
    case 'rel':
      return `release ${e.s} t=${e.token} expect=${e.expect} ${w}`;
    case 'end':
      return `end of session ${e.s} ${w}`;
    case 'read':
      return `read holders=[${e.holders.map(([s, t, m]) => `${s}@${t}/${m}`).join(' ')}] waiters=[${e.waiters.map(([s, m, r]) => `${s}/${m}/${r}`).join(' ')}] ${w}`;
  }
}

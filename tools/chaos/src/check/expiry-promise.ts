/**
 * The promise a KeepAlive answer makes, judged from what other clients saw.
 *
 * A heartbeat answered alive with ttl_ms_remaining R promises that the
 * session, and every lock it holds, lives until at least R after the
 * answer by the leader's clock; the answer comes after the send, so the
 * promise runs at least to send + R/rate − drift in real time, with rate
 * the fastest clock of any replica in that span (at least 1: a slow clock
 * loosens nothing) and drift the client library's allowance for R. A
 * correct leader keeps it even when deposed: it answers only after a
 * leadership confirmation begun after the heartbeat arrived, and a
 * successor starts every session on a fresh TTL after that.
 *
 * The early-expiry judgement (lock-history.ts) needs the session's own
 * client to learn of the end. A client that keeps talking to a deposed
 * leader that goes on answering never does; what shows the broken promise
 * then is the rest of the run. A session S certainly ended by time t when:
 * - log: the final committed log holds S's ExpireSession at revision e,
 *   and some client received a grant with a token above e at t (entries
 *   commit in order, and a grant is answered after its entry committed);
 * - lock: S held L (granted with token T), another session received a
 *   conflicting grant of L with a token above T at t, and S invoked no
 *   release of L and no close before t (a release or close that took
 *   effect was invoked before it did, so S's hold ended by expiry).
 * Both use the conservative end of every interval: the heartbeat's send
 * time (the earliest outstanding one, see keepalive.ts), the grant's
 * receive time. S's promise is broken when t < send + R/rate − drift.
 *
 * A client process under faketime maps its clock to real time through one
 * anchor taken over IPC, which reads late by the message's latency: its
 * sessions and grants are left out (`excludeProcesses`).
 */
import type { History, Mode, Op } from '../history.js';
import { VIOLATIONS_KEPT_MAX } from '../limits.js';
import type { ExpiryClock } from './lock-history.js';

export interface ExpiryPromiseReport {
  /** Sessions with an acknowledged heartbeat (a promise) from a judged process. */
  readonly promises: number;
  /** Of those, sessions with evidence of their end (log or lock) to judge the promise against. */
  readonly judged: number;
  /** The least margin by which a judged session's end came after its promise ran out (negative: a violation); Infinity when none was judged. */
  readonly slackMsMin: number;
  readonly violations: string[];
  readonly violationCount: number;
}

interface Grant {
  readonly op: Op;
  readonly s: string;
  readonly name: string;
  readonly mode: Mode;
  readonly token: number;
  readonly comp: number;
}

/** Where a session's end is certain, and what shows it. */
interface Evidence {
  readonly t: number;
  readonly what: string;
}

function grantsOf(history: History, excluded: ReadonlySet<string>): Grant[] {
  const out: Grant[] = [];
  for (const op of history.ops) {
    if (excluded.has(op.p) || op.op.f !== 'acquire' || op.outcome !== 'ok' || op.r?.f !== 'acquire' || op.r.status !== 'GRANTED') continue;
    out.push({ op, s: op.op.s, name: op.op.name, mode: op.op.mode, token: op.r.token, comp: op.comp });
  }
  return out;
}

/**
 * The earliest-received grant with a token above a revision, by a session
 * other than a given one: grants by token, and for each position the two
 * earliest answers from there on that belong to different sessions.
 */
class EarliestAfter {
  private readonly byToken: Grant[];
  private readonly first: Grant[] = [];
  /** The earliest from the same position whose session differs from first's. */
  private readonly second: Array<Grant | undefined> = [];

  constructor(grants: readonly Grant[]) {
    this.byToken = [...grants].sort((a, b) => a.token - b.token);
    let a: Grant | undefined;
    let b: Grant | undefined;
    for (let i = this.byToken.length - 1; i >= 0; i--) {
      const g = this.byToken[i]!;
      if (a === undefined || g.comp < a.comp) {
        if (a !== undefined && g.s !== a.s) b = a;
        a = g;
      } else if (g.s !== a.s && (b === undefined || g.comp < b.comp)) {
        b = g;
      }
      this.first[i] = a;
      this.second[i] = b;
    }
  }

  query(revision: number, notSession: string): Grant | undefined {
    let lo = 0;
    let hi = this.byToken.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.byToken[mid]!.token > revision) hi = mid;
      else lo = mid + 1;
    }
    const a = this.first[lo];
    return a !== undefined && a.s === notSession ? this.second[lo] : a;
  }
}

const grantText = (g: Grant): string => `${g.op.p}#${g.op.id} received ${g.name} (${g.mode}, token ${g.token}) for ${g.s}`;

/** From the final log: S's ExpireSession committed before a later grant's answer. */
function logEvidence(s: string, expiredAt: ReadonlyMap<string, number>, after: EarliestAfter): Evidence | undefined {
  const e = expiredAt.get(s);
  if (e === undefined) return undefined;
  const g = after.query(e, '');
  return g ? { t: g.comp, what: `its ExpireSession (revision ${e}) committed before ${grantText(g)}` } : undefined;
}

/** When each session first invoked a close, and a release of each name (keyed `session name`). */
interface Ends {
  readonly closeInv: Map<string, number>;
  readonly releaseInv: Map<string, number>;
}

function endsOf(history: History): Ends {
  const closeInv = new Map<string, number>();
  const releaseInv = new Map<string, number>();
  const earliest = (m: Map<string, number>, k: string, t: number): void => {
    if (t < (m.get(k) ?? Infinity)) m.set(k, t);
  };
  for (const o of history.ops) {
    if (o.op.f === 'close') earliest(closeInv, o.op.s, o.inv);
    if (o.op.f === 'release') earliest(releaseInv, `${o.op.s} ${o.op.name}`, o.inv);
  }
  return { closeInv, releaseInv };
}

/** Per lock name: every grant (what conflicts with an exclusive hold) and the exclusive ones (what conflicts with a shared hold). */
interface NameGrants {
  readonly any: EarliestAfter;
  readonly exclusive: EarliestAfter;
}

/** From the history: a conflicting grant over one of S's holds that S neither released nor closed before. */
function lockEvidence(s: string, mine: readonly Grant[], names: ReadonlyMap<string, NameGrants>, ends: Ends): Evidence | undefined {
  const closeInv = ends.closeInv.get(s) ?? Infinity;
  let best: Evidence | undefined;
  for (const held of mine) {
    const n = names.get(held.name)!;
    const first = (held.mode === 'X' ? n.any : n.exclusive).query(held.token, s);
    if (first === undefined || first.comp >= Math.min(closeInv, ends.releaseInv.get(`${s} ${held.name}`) ?? Infinity)) continue;
    if (best === undefined || first.comp < best.t)
      best = { t: first.comp, what: `${grantText(first)} over its hold (token ${held.token}), with no release or close invoked before` };
  }
  return best;
}

/**
 * `expiredAt`: each session the final committed log expired (ExpireSession
 * with outcome ok), with that entry's revision; empty without the log.
 */
export function checkExpiryPromises(
  history: History,
  expiredAt: ReadonlyMap<string, number>,
  clock: ExpiryClock,
  excludeProcesses: ReadonlySet<string> = new Set(),
): ExpiryPromiseReport {
  const grants = grantsOf(history, excludeProcesses);
  const after = new EarliestAfter(grants);
  const byName = new Map<string, Grant[]>();
  const bySession = new Map<string, Grant[]>();
  for (const g of grants) {
    (byName.get(g.name) ?? byName.set(g.name, []).get(g.name)!).push(g);
    (bySession.get(g.s) ?? bySession.set(g.s, []).get(g.s)!).push(g);
  }
  const names = new Map<string, NameGrants>();
  for (const [name, list] of byName)
    names.set(name, { any: new EarliestAfter(list), exclusive: new EarliestAfter(list.filter((g) => g.mode === 'X')) });
  const ends = endsOf(history);
  const processOf = new Map<string, string>();
  for (const o of history.ops) if (o.op.f === 'open' && o.outcome === 'ok' && o.r?.f === 'open') processOf.set(o.r.s, o.p);

  const violations: string[] = [];
  let count = 0;
  let promises = 0;
  let judged = 0;
  let slackMsMin = Infinity;
  for (const [s, facts] of history.sessions) {
    const promise = facts.lastPromise;
    const p = processOf.get(s);
    if (promise === undefined || p === undefined || excludeProcesses.has(p)) continue;
    promises++;
    const candidates = [logEvidence(s, expiredAt, after), lockEvidence(s, bySession.get(s) ?? [], names, ends)].filter(
      (e): e is Evidence => e !== undefined,
    );
    if (candidates.length === 0) continue;
    judged++;
    const ended = candidates.reduce((a, b) => (b.t < a.t ? b : a));
    const rate = clock.rateMax(promise.sentMs, Math.max(promise.sentMs, ended.t));
    const driftMs = clock.driftMs(promise.ttlMs);
    const notBefore = promise.sentMs + promise.ttlMs / rate - driftMs;
    slackMsMin = Math.min(slackMsMin, ended.t - notBefore);
    if (ended.t >= notBefore) continue;
    if (count++ < VIOLATIONS_KEPT_MAX)
      violations.push(
        `session ${s} (${p}) was promised life until ${notBefore.toFixed(1)} (a heartbeat sent at ${promise.sentMs.toFixed(1)} answered with ttl_ms_remaining ${promise.ttlMs}, clock rate up to x${rate}, less ${driftMs} ms drift), yet it had ended by ${ended.t.toFixed(1)}: ${ended.what}`,
      );
  }
  return { promises, judged, slackMsMin, violations, violationCount: count };
}

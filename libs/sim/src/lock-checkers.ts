/**
 * Checkers of the lock service's promises, over the lock state machine's
 * applied results and what clients were told.
 *
 * The applied history: the first replica to apply an index records its
 * result (outcome and events) and the state, after it, of every lock the
 * entry touched; every other replica's result at that index must be the
 * same (state machine safety, at the level of results). From it:
 * - fencing-token: the tokens of acknowledged grants of one name strictly
 *   increase in log order (the index of the entry that decided the grant),
 *   and every acknowledged grant is one the log decided;
 * - lock-exclusion: two acknowledged grants of one name, either exclusive,
 *   do not overlap: the earlier one ended (release, close or expiry
 *   applied) after it and no later than the entry of the other;
 * - stale-read: a ReadIndex read of a lock shows exactly the lock's state
 *   in the applied history at the index it was served at, that index is at
 *   least every acknowledged write before the read began, and no holder it
 *   shows predates the latest acknowledged grant before the read (an
 *   exclusive grant T: every holder has a token of at least T);
 * - early-expiry: a session is never expired before the TTL of a heartbeat
 *   it was told was acknowledged, counted from when the client sent it, on
 *   the clock of the leader whose ExpireSession expired it
 *   (docs/architecture.md, "Promises"; each node's clock drifts, so the check uses that leader's
 *   own clock readings at the send and at the proposal).
 */
import type { NodeId } from '@fencer/base';
import type { ApplyResult, CheckTokenAnswer, Command, LockMode, LockState } from '@fencer/lock-fsm';
import type { Checkers } from './checkers.js';

/** A grant a client was told about (GRANTED, at once or on a retry of a queued request). */
export interface AckedGrant {
  readonly name: string;
  readonly sessionId: string;
  readonly token: number;
  readonly mode: LockMode;
}

interface PlacedGrant extends AckedGrant {
  readonly key: string;
  /** Index of the entry that decided it (its ACQUIRED event). */
  readonly index: number;
}

/** What a lock read must reflect: captured when it begins. */
export interface LockReadBarrier {
  readonly name: string;
  readonly ackedIndexMax: number;
  /** The acknowledged grant of this name latest in log order, when the read began. */
  readonly floor: PlacedGrant | null;
}

export type LockReadAnswer =
  | { readonly kind: 'GetLock'; readonly state: LockState }
  | { readonly kind: 'CheckToken'; readonly token: number; readonly answer: CheckTokenAnswer };

/** A lock's states in the applied history: after each entry that touched it, in log order. */
interface LockHistory {
  readonly indices: number[];
  readonly states: LockState[];
}

/** An acknowledged heartbeat: when the client sent it, the TTL it was told, and every node's clock then. */
interface AckedHeartbeat {
  readonly sentUs: number;
  readonly ttlMs: number;
  readonly clocksMs: ReadonlyMap<string, number>;
}

/** A leader proposed ExpireSession: when, and its clock then. */
interface ExpiryProposal {
  readonly node: NodeId;
  readonly atUs: number;
  readonly clockMs: number;
}

/** Acknowledged heartbeats kept per session (the latest; enough to find the last one before any proposal). */
const heartbeatsKeptMax = 16;

const grantKey = (name: string, sessionId: string, token: number): string => `${name} ${sessionId} ${token}`;

export function lockFingerprint(s: LockState): string {
  // No ' | ' in it: the runner cuts a violation's detail there.
  let out = `${s.mode ?? 'free'}${s.delayed ? ' delayed' : ''}; holders`;
  for (const h of s.holders) out += ` ${h.sessionId}/${h.mode}/${h.token}`;
  out += '; waiters';
  for (const w of s.waiters) out += ` ${w.sessionId}/${w.mode}/${w.requestId}`;
  return out;
}

/**
 * What must agree between replicas applying one index: the revision, the
 * outcome and each event's type, name, session, token and request id. A
 * JSON array of them, unambiguous and built natively, compared as is.
 */
function resultDigest(result: ApplyResult): string {
  const parts: unknown[] = [result.revision, result.outcome];
  for (const e of result.events) parts.push(e.type, e.name, e.sessionId, e.token, e.requestId ?? '');
  return JSON.stringify(parts);
}

export class LockCheckers {
  /** Per index: the first applier's result digest (see resultDigest). */
  private readonly results = new Map<number, { readonly digest: string; readonly node: NodeId }>();
  private readonly histories = new Map<string, LockHistory>();
  /** Grant key → index of the entry that granted it; and of the entry that ended it. */
  private readonly grantedAt = new Map<string, number>();
  private readonly endedAt = new Map<string, number>();
  /** Per name: acknowledged grants in log order. */
  private readonly acked = new Map<string, PlacedGrant[]>();
  private readonly ackedKeys = new Set<string>();
  grantsAcked = 0;
  expiries = 0;
  waitsTimedOut = 0;
  lockReadsChecked = 0;
  heartbeatsAcked = 0;
  private readonly heartbeats = new Map<string, AckedHeartbeat[]>();
  /** Session and term → the first ExpireSession proposal of that term's leader. */
  private readonly expiryProposals = new Map<string, ExpiryProposal>();
  private readonly expiredSessions = new Set<string>();

  constructor(private readonly checkers: Checkers) {}

  // ---- the applied history ----

  /** `node` applied `command` at `index` with `result`; `stateOf` reads its state machine right after. */
  applied(node: NodeId, index: number, command: Command, result: ApplyResult, stateOf: (name: string) => LockState): void {
    const digest = resultDigest(result);
    const seen = this.results.get(index);
    if (seen !== undefined) {
      if (seen.digest !== digest) {
        this.checkers.fail(
          'state-machine-safety',
          `${node} applied ${command.kind} at ${index} with another result than ${seen.node}: ${JSON.stringify(result.outcome)}`,
        );
      }
      return;
    }
    this.results.set(index, { digest, node });
    if (command.kind === 'ExpireSession' && result.outcome.ok) this.expiries++;
    if (command.kind === 'CancelWait' && result.outcome.ok && 'cancelled' in result.outcome && result.outcome.cancelled)
      this.waitsTimedOut++;
    const touched = new Set<string>();
    if ('name' in command) touched.add(command.name);
    for (const e of result.events) {
      touched.add(e.name);
      const key = grantKey(e.name, e.sessionId, e.token);
      if (e.type === 'ACQUIRED') {
        if (!this.grantedAt.has(key)) this.grantedAt.set(key, index);
      } else if ((e.type === 'RELEASED' || e.type === 'EXPIRED') && e.token > 0) {
        if (!this.endedAt.has(key)) this.endedAt.set(key, index);
      }
    }
    for (const name of touched) {
      let h = this.histories.get(name);
      if (h === undefined) this.histories.set(name, (h = { indices: [], states: [] }));
      const last = h.indices[h.indices.length - 1];
      if (last !== undefined && last >= index) {
        this.checkers.fail('sim-error', `the applied history of ${name} got index ${index} after ${last}`);
        continue;
      }
      h.indices.push(index);
      h.states.push(stateOf(name));
    }
  }

  /** The lock's state after every entry up to `index` (free if none touched it). */
  stateAt(name: string, index: number): LockState {
    const h = this.histories.get(name);
    const free: LockState = { name, mode: null, holders: [], waiters: [], delayed: false };
    if (h === undefined) return free;
    let lo = 0;
    let hi = h.indices.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((h.indices[mid] as number) <= index) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? free : (h.states[lo - 1] as LockState);
  }

  // ---- what clients were told ----

  ackedGrant(g: AckedGrant): void {
    const key = grantKey(g.name, g.sessionId, g.token);
    if (this.ackedKeys.has(key)) return; // A retry answered with the same grant.
    this.ackedKeys.add(key);
    this.grantsAcked++;
    const index = this.grantedAt.get(key);
    if (index === undefined) {
      this.checkers.fail(
        'fencing-token',
        `${g.sessionId} was told it holds ${g.name} with token ${g.token}, which no applied entry granted`,
      );
      return;
    }
    const placed: PlacedGrant = { ...g, key, index };
    let list = this.acked.get(g.name);
    if (list === undefined) this.acked.set(g.name, (list = []));
    let at = list.length;
    while (at > 0 && (list[at - 1] as PlacedGrant).index > index) at--;
    list.splice(at, 0, placed);
    this.checkFencing(list, at);
    for (const other of list) if (other !== placed) this.checkExclusion(other, placed);
  }

  /** Tokens strictly increase with the deciding index (grants of one entry share theirs). */
  private checkFencing(list: readonly PlacedGrant[], at: number): void {
    const g = list[at] as PlacedGrant;
    for (const other of [list[at - 1], list[at + 1]]) {
      if (other === undefined) continue;
      const [a, b] = other.index <= g.index ? [other, g] : [g, other];
      const bad = a.index === b.index ? a.token !== b.token : a.token >= b.token;
      if (bad) {
        this.checkers.fail(
          'fencing-token',
          `${g.name}: the grant decided at ${a.index} has token ${a.token}, the one decided at ${b.index} token ${b.token} (${a.sessionId}, ${b.sessionId})`,
        );
      }
    }
  }

  private checkExclusion(x: PlacedGrant, y: PlacedGrant): void {
    if (x.mode === 'SHARED' && y.mode === 'SHARED') return;
    const [a, b] = x.index <= y.index ? [x, y] : [y, x];
    const end = this.endedAt.get(a.key);
    if (a.index < b.index && end !== undefined && end <= b.index) return;
    this.checkers.fail(
      'lock-exclusion',
      `${a.name}: ${a.mode} grant to ${a.sessionId} at ${a.index} (token ${a.token}) ${end === undefined ? 'never ended' : `ended at ${end}`}, ` +
        `but ${b.mode} grant to ${b.sessionId} at ${b.index} (token ${b.token}) was acknowledged`,
    );
  }

  // ---- leases ----

  heartbeatAcked(sessionId: string, sentUs: number, ttlMs: number, clocksMs: ReadonlyMap<string, number>): void {
    this.heartbeatsAcked++;
    let list = this.heartbeats.get(sessionId);
    if (list === undefined) this.heartbeats.set(sessionId, (list = []));
    let at = list.length;
    while (at > 0 && (list[at - 1] as AckedHeartbeat).sentUs > sentUs) at--;
    list.splice(at, 0, { sentUs, ttlMs, clocksMs });
    if (list.length > heartbeatsKeptMax) list.shift();
  }

  expiryProposed(sessionId: string, term: number, node: NodeId, atUs: number, clockMs: number): void {
    const key = `${sessionId} ${term}`;
    if (!this.expiryProposals.has(key)) this.expiryProposals.set(key, { node, atUs, clockMs });
  }

  /** An ExpireSession of `term` expired the session (first application anywhere). */
  expiryApplied(sessionId: string, term: number, _atUs: number): void {
    if (this.expiredSessions.has(sessionId)) return;
    this.expiredSessions.add(sessionId);
    const proposal = this.expiryProposals.get(`${sessionId} ${term}`);
    const list = this.heartbeats.get(sessionId);
    if (proposal === undefined || list === undefined) return;
    let ack: AckedHeartbeat | undefined;
    for (const h of list) if (h.sentUs <= proposal.atUs) ack = h;
    const sentClockMs = ack?.clocksMs.get(proposal.node);
    if (ack === undefined || sentClockMs === undefined) return;
    const elapsedMs = proposal.clockMs - sentClockMs;
    if (elapsedMs < ack.ttlMs) {
      this.checkers.fail(
        'early-expiry',
        `${sessionId} was expired by ${proposal.node} (term ${term}) ${elapsedMs.toFixed(1)} ms by its clock after a heartbeat sent at ${(ack.sentUs / 1e6).toFixed(6)} s ` +
          `was acknowledged with a TTL of ${ack.ttlMs} ms`,
      );
    }
  }

  // ---- reads ----

  readBarrier(name: string): LockReadBarrier {
    const list = this.acked.get(name);
    return { name, ackedIndexMax: this.checkers.readBarrier().ackedIndexMax, floor: list?.[list.length - 1] ?? null };
  }

  /** `node` answered a read of `barrier.name` after its ReadIndex, with its state machine at `appliedIndex`. */
  readServed(node: NodeId, barrier: LockReadBarrier, appliedIndex: number, read: LockReadAnswer): void {
    this.checkers.readsChecked++;
    this.lockReadsChecked++;
    const name = barrier.name;
    if (appliedIndex < barrier.ackedIndexMax) {
      this.checkers.fail(
        'stale-read',
        `${node} served ${read.kind} ${name} at applied ${appliedIndex}, begun after a write acked at ${barrier.ackedIndexMax}`,
      );
      return;
    }
    const want = this.stateAt(name, appliedIndex);
    if (read.kind === 'GetLock') {
      const got = lockFingerprint(read.state);
      if (got !== lockFingerprint(want)) {
        this.checkers.fail(
          'stale-read',
          `${node} served GetLock ${name} at applied ${appliedIndex} as [${got}], the applied history has [${lockFingerprint(want)}]`,
        );
        return;
      }
      this.checkFloor(
        node,
        barrier,
        read.state.holders.map((h) => ({ token: h.token as number, mode: h.mode })),
      );
    } else {
      let current = false;
      let latest = 0;
      for (const h of want.holders) {
        if (h.token === read.token) current = true;
        if (h.token > latest) latest = h.token;
      }
      if (read.answer.current !== current || read.answer.latestToken !== latest) {
        this.checkers.fail(
          'stale-read',
          `${node} served CheckToken ${name} ${read.token} at applied ${appliedIndex} as ` +
            `(current ${read.answer.current}, latest ${read.answer.latestToken}), the applied history gives (${current}, ${latest})`,
        );
        return;
      }
      if (read.answer.latestToken > 0) this.checkFloor(node, barrier, [{ token: read.answer.latestToken, mode: 'SHARED' }]);
    }
  }

  /** Holders a read shows against the latest acknowledged grant before it (tokens only grow). */
  private checkFloor(node: NodeId, barrier: LockReadBarrier, holders: readonly { token: number; mode: LockMode }[]): void {
    const floor = barrier.floor;
    if (floor === null) return;
    for (const h of holders) {
      if (h.token >= floor.token) continue;
      if (floor.mode === 'EXCLUSIVE' || h.mode === 'EXCLUSIVE') {
        this.checkers.fail(
          'stale-read',
          `${node} read ${barrier.name} with a holder of token ${h.token} (${h.mode}), begun after a ${floor.mode} grant with token ${floor.token} was acknowledged`,
        );
        return;
      }
    }
  }
}

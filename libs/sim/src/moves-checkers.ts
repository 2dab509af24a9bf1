/**
 * The lock-history checkers of the moves simulation, across both cells.
 *
 * Each cell's applied history is recorded from the first replica to apply
 * each index (a later replica applies the same result; the one-cell sweep
 * checks that). A namespace's history is cut into segments: segment 0 is its
 * first claim, and every ImportNamespace that applies starts the next one
 * (imports apply only after the source froze, so segment order is the order
 * ownership changed hands). Positions in the namespace's history are
 * (segment, index in that segment's cell): an order that knows nothing of
 * revisions, so it can judge them.
 *
 * - fencing-token: the grants of one lock (ACQUIRED events) have strictly
 *   increasing tokens in history order, across every move (grants of one
 *   entry share theirs); and no cell grants in an older segment once a newer
 *   one granted (two cells serving one namespace);
 * - acked-grant-lost: every grant a client was told of was decided by some
 *   applied entry; and an import holds exactly what the source held when it
 *   froze: every holder with its token, every lock-delay;
 * - fifo-order: the import keeps every lock's waiters in their order;
 * - route-ahead-of-import: the meta group switches a route (a move enters
 *   'switching') only to a cell whose import of the namespace committed;
 * - early-expiry: no session is expired (an ExpireSession applied, on
 *   either cell) before the TTL of a heartbeat it was told was acknowledged
 *   ran out, counted from when the client sent it: a move must not cost a
 *   session its lease (every member runs on the one virtual clock here);
 * - session-leak: after healing, no session whose client died long enough
 *   ago is still held by either cell (an imported session the target's
 *   leader does not track would never expire);
 * - ownership: after healing, the namespace is active on exactly the cell
 *   its route names, and every move finished.
 */
import type { ApplyResult, Command, LockState } from '@fencer/lock-fsm';
import type { Move } from '@fencer/meta-fsm';
import type { AckedGrant } from './lock-checkers.js';
import { lockFingerprint } from './lock-checkers.js';

export const MOVE_CHECKERS = [
  'fencing-token',
  'acked-grant-lost',
  'fifo-order',
  'route-ahead-of-import',
  'early-expiry',
  'session-leak',
  'ownership',
  'fatal',
  'stalled',
] as const;
export type MoveCheckerName = (typeof MOVE_CHECKERS)[number];

export interface MoveViolation {
  readonly checker: MoveCheckerName;
  readonly detail: string;
  /** Virtual time the checker fired at. */
  readonly timeUs: number;
}

/** A place in a namespace's history: its segment, and the index in the cell that held that segment. */
interface Position {
  readonly segment: number;
  readonly index: number;
}

interface Grant extends Position {
  readonly token: number;
  readonly cell: string;
}

const grantKey = (name: string, sessionId: string, token: number): string => `${name} ${sessionId} ${token}`;

function namespaceOfLock(name: string): string {
  return name.split('/')[2] ?? '';
}

export class MoveCheckers {
  readonly violations: MoveViolation[] = [];
  /** Per cell: the highest index recorded (the first applier of each index). */
  private readonly appliedMax = new Map<string, number>();
  /** Per cell and namespace: the segment it holds (undefined: it does not hold the namespace). */
  private readonly segmentHeld = new Map<string, number>();
  private segments = 0;
  /** Per lock: the latest grant in history order. */
  private readonly lastGrant = new Map<string, Grant>();
  private readonly granted = new Set<string>();
  /** Per cell and namespace: each lock's fingerprint when the namespace last froze there. */
  private readonly frozen = new Map<string, Map<string, string>>();
  /** Per session: the latest time (µs) an acknowledged heartbeat promised it lives to. */
  private readonly leases = new Map<string, { readonly untilUs: number; readonly sentUs: number; readonly cell: string }>();
  grantsAcked = 0;
  grantsApplied = 0;
  heartbeatsAcked = 0;
  expiries = 0;
  imports = 0;
  switches = 0;

  constructor(
    private readonly now: () => number,
    /** The names of a namespace's locks (the workload's). */
    private readonly lockNames: (namespace: string) => readonly string[],
  ) {}

  fail(checker: MoveCheckerName, detail: string): void {
    this.violations.push({ checker, detail, timeUs: this.now() });
  }

  /** A replica of `cell` applied `command` at `index`; `stateOf` reads its state machine right after. */
  applied(cell: string, index: number, command: Command, result: ApplyResult, stateOf: (name: string) => LockState): void {
    if (index <= (this.appliedMax.get(cell) ?? 0)) return;
    this.appliedMax.set(cell, index);
    const ok = result.outcome.ok;
    switch (command.kind) {
      case 'ClaimNamespace':
        if (ok && !this.segmentHeld.has(`${cell} ${command.namespace}`)) this.segmentHeld.set(`${cell} ${command.namespace}`, 0);
        break;
      case 'FreezeNamespace':
        if (ok) this.frozen.set(`${cell} ${command.namespace}`, this.fingerprints(command.namespace, stateOf));
        break;
      case 'ImportNamespace':
      case 'ImportStagedNamespace':
        if (ok) this.imported(cell, command.namespace, stateOf);
        break;
      case 'DropNamespace':
        if (ok) this.segmentHeld.delete(`${cell} ${command.namespace}`);
        break;
      case 'ExpireSession':
        if (ok) this.expired(cell, command.sessionId);
        break;
      default:
        break;
    }
    for (const e of result.events) {
      if (e.type !== 'ACQUIRED') continue;
      const segment = this.segmentHeld.get(`${cell} ${namespaceOfLock(e.name)}`) ?? -1;
      this.grant(e.name, { segment, index, token: e.token, cell });
      this.granted.add(grantKey(e.name, e.sessionId, e.token));
    }
  }

  /** Does `cell` hold `namespace` by a committed claim or import (not dropped since)? */
  holds(cell: string, namespace: string): boolean {
    return this.segmentHeld.has(`${cell} ${namespace}`);
  }

  private fingerprints(namespace: string, stateOf: (name: string) => LockState): Map<string, string> {
    return new Map(this.lockNames(namespace).map((name) => [name, lockFingerprint(stateOf(name))]));
  }

  private imported(cell: string, namespace: string, stateOf: (name: string) => LockState): void {
    this.imports++;
    this.segmentHeld.set(`${cell} ${namespace}`, ++this.segments);
    // The source is the cell that froze the namespace last, other than this one.
    let source: Map<string, string> | undefined;
    let sourceCell = '';
    for (const [key, prints] of this.frozen) {
      const [c, ns] = key.split(' ');
      if (ns === namespace && c !== cell) [source, sourceCell] = [prints, c as string];
    }
    if (source === undefined) return this.fail('acked-grant-lost', `${cell} imported ${namespace}, which no other cell froze`);
    for (const [name, want] of source) {
      const got = lockFingerprint(stateOf(name));
      if (got === want) continue;
      const checker = holdersOf(got) === holdersOf(want) ? 'fifo-order' : 'acked-grant-lost';
      this.fail(checker, `${cell} imported ${name} as [${got}]; ${sourceCell} froze it as [${want}]`);
    }
  }

  private grant(name: string, g: Grant): void {
    this.grantsApplied++;
    const last = this.lastGrant.get(name);
    if (last !== undefined) {
      const later = g.segment > last.segment || (g.segment === last.segment && g.index > last.index);
      const same = g.segment === last.segment && g.index === last.index;
      if (!later && !same) {
        this.fail(
          'fencing-token',
          `${g.cell} granted ${name} (token ${g.token}) in segment ${g.segment} after ${last.cell} granted it in segment ${last.segment}`,
        );
        return;
      }
      if ((same && g.token !== last.token) || (later && g.token <= last.token)) {
        this.fail(
          'fencing-token',
          `${name}: ${last.cell} granted token ${last.token} (segment ${last.segment}, index ${last.index}), ` +
            `then ${g.cell} granted token ${g.token} (segment ${g.segment}, index ${g.index})`,
        );
      }
    }
    this.lastGrant.set(name, g);
  }

  /** A client was told it holds a lock. */
  ackedGrant(g: AckedGrant): void {
    this.grantsAcked++;
    if (!this.granted.has(grantKey(g.name, g.sessionId, g.token))) {
      this.fail('acked-grant-lost', `${g.sessionId} was told it holds ${g.name} with token ${g.token}, which no applied entry granted`);
    }
  }

  /** A heartbeat the client sent at `sentUs` to `cell` was acknowledged with `ttlMs` left. */
  heartbeatAcked(sessionId: string, cell: string, sentUs: number, ttlMs: number): void {
    this.heartbeatsAcked++;
    const untilUs = sentUs + ttlMs * 1000;
    const old = this.leases.get(sessionId);
    if (old === undefined || old.untilUs < untilUs) this.leases.set(sessionId, { untilUs, sentUs, cell });
  }

  private expired(cell: string, sessionId: string): void {
    this.expiries++;
    const lease = this.leases.get(sessionId);
    if (lease === undefined || this.now() >= lease.untilUs) return;
    this.fail(
      'early-expiry',
      `${cell} expired ${sessionId} at ${(this.now() / 1e6).toFixed(3)} s; a heartbeat sent at ${(lease.sentUs / 1e6).toFixed(3)} s to ${lease.cell} ` +
        `was acknowledged with a lease to ${(lease.untilUs / 1e6).toFixed(3)} s`,
    );
  }

  /** The meta group applied a move's new state (first applier only: the caller filters by index). */
  moveApplied(move: Move): void {
    if (move.state !== 'switching') return;
    this.switches++;
    if (!this.holds(move.toCell, move.namespace)) {
      this.fail(
        'route-ahead-of-import',
        `move ${move.id} switched ${move.namespace}'s route to ${move.toCell}, which holds no committed import of it`,
      );
    }
  }
}

function holdersOf(fingerprint: string): string {
  return fingerprint.split('; waiters')[0] ?? '';
}

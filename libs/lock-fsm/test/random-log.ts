/**
 * A seeded generator of realistic logs: it builds each entry by looking at a
 * live "driver" state machine (so releases often carry current tokens, lifts
 * name real delays, cancels name real waiters) and applies it there before
 * drawing the next. Namespaces move out (freeze, export, drop) and back in
 * (import) within the log, and a "tenant" namespace arrives from a foreign
 * cell whose log is far ahead, which raises the revision base mid-log. Indexes
 * have occasional gaps, like a Raft log whose membership entries are not
 * commands.
 */
import { Namespace, RequestId, Revision, SeededRandom, type Random, type SessionId } from '@fencer/base';
import { makeSessionId } from '@fencer/contract';
import { encodeCommand, LockStateMachine, type Command, type FsmLimits } from '../src/index.js';

export interface LogEntry {
  readonly index: number;
  readonly data: Uint8Array;
}

const NAMESPACES = ['payments', 'billing', 'jobs'] as const;
const TENANT = Namespace('tenant');

/** An export of namespace "tenant" from a foreign cell at log index `startIndex` and beyond. */
function foreignExport(rnd: Random, startIndex: number): Uint8Array {
  const cell = new LockStateMachine({ autoClaim: true });
  let index = startIndex;
  const [a, b] = [makeSessionId(TENANT, 's0'), makeSessionId(TENANT, 's1')];
  for (const sessionId of [a, b])
    cell.apply(++index, { kind: 'OpenSession', sessionId, clientId: 'foreign', namespace: TENANT, ttlMs: 2000 });
  const acquire = (sessionId: SessionId, name: string, requestId: string) =>
    cell.apply(++index, {
      kind: 'Acquire',
      sessionId,
      name,
      mode: 'EXCLUSIVE',
      requestId: RequestId(requestId),
      waitMs: 1000,
      lockDelayMs: 0,
      tryLock: false,
    });
  acquire(a, '/ls/tenant/a', 'r0');
  acquire(b, '/ls/tenant/a', 'r1');
  if (rnd.chance(0.5)) acquire(b, '/ls/tenant/b', 'r2');
  cell.apply(++index, { kind: 'FreezeNamespace', namespace: TENANT });
  const out = cell.apply(++index, { kind: 'ExportNamespace', namespace: TENANT }).outcome;
  if (!out.ok) throw new Error(`foreign export failed: ${out.code}`);
  return out.data;
}

export function randomLog(seed: number, length: number, limits: Partial<FsmLimits> = {}): LogEntry[] {
  const rnd: Random = new SeededRandom(seed);
  const driver = new LockStateMachine({ autoClaim: true, limits });
  const log: LogEntry[] = [];
  const exported = new Map<string, Uint8Array>();
  let index = rnd.range(0, 3);
  const tenantHere = () => driver.namespaceInfo(TENANT) !== undefined;
  const namespaces = (): readonly string[] => (tenantHere() ? [...NAMESPACES, TENANT] : NAMESPACES);
  const sid = (): SessionId => {
    const ns = rnd.pick(namespaces());
    return makeSessionId(Namespace(ns), `s${rnd.int(5)}`);
  };
  /** Mostly a live session (so most commands reach the locks), sometimes any id. */
  const liveSid = (p: number): SessionId => {
    const live = [...driver.sessions()];
    return live.length > 0 && rnd.chance(p) ? rnd.pick(live).sessionId : sid();
  };
  const nameIn = (ns: string) => `/ls/${ns}/${rnd.pick(['a', 'b', 'c', 'd/e'])}`;
  const nsOf = (id: string) => id.split(':')[0] as string;

  for (let i = 0; i < length; i++) {
    // A frozen namespace blocks most commands: move it along quickly.
    const frozen = namespaces().filter((n) => driver.namespaceInfo(n)?.state === 'frozen');
    const roll = frozen.length > 0 && rnd.chance(0.25) ? 99 : rnd.int(100);
    let command: Command;
    if (roll < 10) {
      const id = sid();
      command = {
        kind: 'OpenSession',
        sessionId: id,
        clientId: `client-${id.length % 3}`,
        namespace: Namespace(nsOf(id)),
        ttlMs: rnd.pick([1000, 5000]),
      };
    } else if (roll < 50) {
      const id = liveSid(0.9);
      command = {
        kind: 'Acquire',
        sessionId: id,
        name: rnd.chance(0.95) ? nameIn(nsOf(id)) : nameIn(rnd.pick(namespaces())),
        mode: rnd.chance(0.5) ? 'SHARED' : 'EXCLUSIVE',
        requestId: RequestId(`r${rnd.int(12)}`),
        waitMs: rnd.pick([0, 1000, 30_000]),
        lockDelayMs: rnd.pick([0, 0, 0, 1500]),
        tryLock: rnd.chance(0.25),
      };
    } else if (roll < 70) {
      const ns = rnd.pick(namespaces());
      const lock = driver.getLock(nameIn(ns));
      const h = lock.holders.length > 0 ? rnd.pick(lock.holders) : undefined;
      command = h
        ? { kind: 'Release', sessionId: h.sessionId, name: lock.name, token: Revision(rnd.chance(0.9) ? h.token : h.token - 1) }
        : { kind: 'Release', sessionId: sid(), name: lock.name, token: Revision(rnd.int(50)) };
    } else if (roll < 78) {
      const waiters = [...driver.waiters()];
      const w = waiters.length > 0 && rnd.chance(0.8) ? rnd.pick(waiters) : undefined;
      command = w
        ? {
            kind: 'CancelWait',
            sessionId: w.sessionId,
            name: w.name,
            requestId: w.requestId,
            reason: rnd.chance(0.5) ? 'timed-out' : 'cancelled',
          }
        : { kind: 'CancelWait', sessionId: sid(), name: nameIn('payments'), requestId: RequestId('r1'), reason: 'cancelled' };
    } else if (roll < 84) {
      command = { kind: rnd.chance(0.5) ? 'CloseSession' : 'ExpireSession', sessionId: liveSid(0.7) };
    } else if (roll < 90) {
      const delayed = [...driver.delayedLocks()];
      const d = delayed.length > 0 ? rnd.pick(delayed) : undefined;
      command = d ? { kind: 'LiftLockDelay', name: d.name, delayRevision: d.delayRevision } : { kind: 'Noop' };
    } else if (roll < 93) {
      // Tenant quotas small enough to bite (0 = none), so refusals and the export of quotas are exercised.
      const quota = () => rnd.pick([0, 0, 1, 2, 3]);
      const quotas = { maxSessions: quota(), maxLocks: quota(), maxWaiters: quota() };
      command = { kind: 'SetNamespaceQuotas', namespace: Namespace(rnd.pick(namespaces())), quotas };
    } else if (roll < 94) {
      // Token hashes, some with an expiry: the state, snapshots and exports carry them.
      const credentials = rnd.chance(0.2)
        ? []
        : [
            { hash: `sha256:t${rnd.int(4)}`, validUntilMs: 0 },
            { hash: 'sha256:old', validUntilMs: rnd.int(3) * 1000 },
          ];
      command = { kind: 'SetNamespaceCredentials', namespace: Namespace(rnd.pick(namespaces())), credentials };
    } else if (roll < 96) {
      command = { kind: 'Noop' };
    } else if (!tenantHere() && roll < 97) {
      // A tenant moves in from a cell far ahead: the import raises the revision base.
      command = { kind: 'ImportNamespace', namespace: TENANT, data: foreignExport(rnd, index + 1000 + rnd.int(100_000)), activate: true };
    } else {
      // Namespace life cycle: freeze, export, drop, import back, unfreeze.
      const ns = Namespace(frozen[0] ?? rnd.pick(namespaces()));
      const info = driver.namespaceInfo(ns);
      const saved = exported.get(ns);
      if (info?.state === 'moved' && saved !== undefined) {
        command = { kind: 'ImportNamespace', namespace: ns, data: saved, activate: rnd.chance(0.5) };
        exported.delete(ns);
      } else if (info?.state === 'frozen') {
        const step = rnd.int(4);
        command =
          step <= 1
            ? { kind: 'UnfreezeNamespace', namespace: ns }
            : step === 2
              ? { kind: 'ExportNamespace', namespace: ns }
              : { kind: 'DropNamespace', namespace: ns };
      } else if (info?.state === 'moved') {
        command = { kind: 'ClaimNamespace', namespace: ns };
      } else {
        command = { kind: 'FreezeNamespace', namespace: ns };
      }
    }
    index += rnd.chance(0.05) ? 2 : 1;
    const data = encodeCommand(command);
    const result = driver.applyEntry(index, data);
    if (command.kind === 'ExportNamespace' && result.outcome.ok)
      exported.set(command.namespace, (result.outcome as { data: Uint8Array }).data);
    log.push({ index, data });
  }
  return log;
}

/**
 * Goal: the state machine keeps every promise of the lock table, checked
 * against a small, obviously-correct reference model (test/reference-model.ts).
 * Method: fast-check model-based testing (fc.commands + fc.modelRun). Each
 * run draws small limits and a random history of up to 60 commands over 6
 * sessions (opened first) in 2 namespaces, 2 lock names per namespace and a
 * small pool of request ids (so retries and dedupe eviction happen),
 * including snapshot-and-restore steps. After every command the outcome,
 * the entry's events, every lock's state, CheckToken and the session set
 * must match the model exactly, and the real state machine's invariants must
 * hold. 10,000 runs per CI run (LOCK_FSM_MODEL_RUNS overrides; a failure
 * prints its seed and replay path).
 */
import { describe, it } from 'vitest';
import fc from 'fast-check';
import { Namespace, RequestId, Revision, SessionId } from '@fencer/base';
import { encodeCommand, LockStateMachine, type ApplyResult, type Command, type FsmLimits, type LockEvent } from './index.js';
import { ReferenceModel, type ModelLimits, type Mode, type Obs } from '../test/reference-model.js';

/** Four sessions share namespace a (batch grants need a holder and two waiters); b has two. */
const SESSIONS = ['a:s0', 'a:s1', 'a:s2', 'a:s3', 'b:s4', 'b:s5'] as const;
const NAMESPACES = ['a', 'b'] as const;
/** Lock names by namespace; a command picks one of its session's own namespace, or (rarely) one of the other. */
const NAMES_BY_NS: Record<string, readonly string[]> = { a: ['/ls/a/x', '/ls/a/y'], b: ['/ls/b/x', '/ls/b/y'] };
const NAMES = [...(NAMES_BY_NS['a'] as string[]), ...(NAMES_BY_NS['b'] as string[])];
const RUNS = Number(process.env['LOCK_FSM_MODEL_RUNS'] ?? 10_000);
const MAX_COMMANDS = 60;

interface Real {
  fsm: LockStateMachine;
  readonly limits: Partial<FsmLimits>;
}

/** `n` picks a name of the session's namespace, or of the other one when `foreign`. */
type Op =
  | { t: 'open'; s: number; ttl: number }
  | { t: 'close'; s: number }
  | { t: 'expire'; s: number }
  | { t: 'acquire'; s: number; n: number; foreign: boolean; mode: Mode; req: number; tryLock: boolean; delay: number }
  | { t: 'release'; s: number; n: number; foreign: boolean; tok: 'held' | 'current' | 'stale' | 'zero' }
  | { t: 'cancel'; s: number; n: number; foreign: boolean; req: number | 'waiting'; reason: 'timed-out' | 'cancelled' }
  | { t: 'lift'; s: number; n: number; which: 'current' | 'stale' }
  | { t: 'freeze'; ns: number }
  | { t: 'unfreeze'; ns: number }
  | { t: 'noop' }
  | { t: 'restore' };

/** Structural equality of plain values (cheaper than expect() on the hot path of 10,000 runs). */
function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!equal(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!equal((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

function same(actual: unknown, expected: unknown, what: string): void {
  if (!equal(actual, expected)) throw new Error(`${what}\n  expected ${JSON.stringify(expected)}\n  actual   ${JSON.stringify(actual)}`);
}

/** The real outcome in the model's shape: no messages, holders and delayed locks as tuples. */
function normalize(outcome: unknown): Obs {
  const out: Record<string, unknown> = { ...(outcome as Record<string, unknown>) };
  delete out['message'];
  delete out['sessionId'];
  delete out['ttlMs'];
  if (Array.isArray(out['holders']))
    out['holders'] = (out['holders'] as { sessionId: string; token: number; mode: string }[]).map((h) => [h.sessionId, h.token, h.mode]);
  if (Array.isArray(out['delayed'])) {
    out['delayed'] = (out['delayed'] as { name: string; delayMs: number; delayRevision: number }[]).map((d) => [
      d.name,
      d.delayMs,
      d.delayRevision,
    ]);
  }
  return out;
}

function realLockView(fsm: LockStateMachine, name: string): Obs {
  const s = fsm.getLock(name);
  return {
    mode: s.mode,
    holders: s.holders.map((h) => [h.sessionId, h.token, h.mode]),
    waiters: s.waiters.map((w) => [w.sessionId, w.mode, w.requestId]),
    delayed: s.delayed,
  };
}

function eventString(e: LockEvent): string {
  return `${e.type} ${e.name} ${e.sessionId} ${e.token} ${e.requestId ?? '-'}`;
}

const nsOfSession = (i: number): string => (SESSIONS[i] as string).split(':')[0] as string;
function nameFor(s: number, n: number, foreign: boolean): string {
  const own = nsOfSession(s);
  const ns = foreign ? (own === 'a' ? 'b' : 'a') : own;
  return (NAMES_BY_NS[ns] as string[])[n] as string;
}

/** Applies one op to the model and (as a logged entry) to the real state machine, and compares everything observable. */
function step(op: Op, m: ReferenceModel, r: Real): void {
  if (op.t === 'restore') {
    const bytes = r.fsm.snapshot();
    r.fsm = LockStateMachine.restore(bytes, { autoClaim: true, limits: r.limits });
    same([...r.fsm.snapshot()], [...bytes], 'snapshot(restore(snapshot))');
    return;
  }
  m.next();
  const { command, expected } = applyToModel(op, m);
  const result = r.fsm.applyEntry(m.index, encodeCommand(command));
  compareWithModel(op, m, r, result, expected);
}

/** The command an op stands for, and the model's outcome of it. */
function applyToModel(op: Exclude<Op, { t: 'restore' }>, m: ReferenceModel): { command: Command; expected: Obs } {
  let command: Command;
  let expected: Obs;
  const sid = (i: number) => SESSIONS[i] as string;
  switch (op.t) {
    case 'open':
      command = {
        kind: 'OpenSession',
        sessionId: SessionId(sid(op.s)),
        clientId: `c${op.s}`,
        namespace: Namespace(nsOfSession(op.s)),
        ttlMs: op.ttl,
      };
      expected = m.open(sid(op.s), nsOfSession(op.s), `c${op.s}`, op.ttl);
      break;
    case 'close':
    case 'expire':
      command = { kind: op.t === 'close' ? 'CloseSession' : 'ExpireSession', sessionId: SessionId(sid(op.s)) };
      expected = m.end(sid(op.s), op.t === 'expire');
      break;
    case 'acquire': {
      const name = nameFor(op.s, op.n, op.foreign);
      const req = `r${op.req}`;
      command = {
        kind: 'Acquire',
        sessionId: SessionId(sid(op.s)),
        name,
        mode: op.mode,
        requestId: RequestId(req),
        waitMs: op.tryLock ? 0 : 1000,
        lockDelayMs: op.delay,
        tryLock: op.tryLock,
      };
      expected = m.acquire(sid(op.s), name, op.mode, req, op.tryLock, op.delay);
      break;
    }
    case 'release': {
      // 'held': whatever the session holds first, with its token (a release that finds its lock).
      const name = (op.tok === 'held' ? m.heldBy(sid(op.s))[0] : undefined) ?? nameFor(op.s, op.n, op.foreign);
      const current = m.tokenOf(sid(op.s), name);
      const token = op.tok === 'zero' ? 0 : op.tok === 'current' || op.tok === 'held' ? current : Math.max(0, (current || m.index) - 1);
      command = { kind: 'Release', sessionId: SessionId(sid(op.s)), name, token: Revision(token) };
      expected = m.release(sid(op.s), name, token);
      break;
    }
    case 'cancel': {
      const name = nameFor(op.s, op.n, op.foreign);
      // 'waiting': the request the session waits with for this name, if any (a cancel that finds its waiter).
      const requestId = op.req === 'waiting' ? (m.waitingRequestOf(sid(op.s), name) ?? 'r0') : `r${op.req}`;
      command = { kind: 'CancelWait', sessionId: SessionId(sid(op.s)), name, requestId: RequestId(requestId), reason: op.reason };
      expected = m.cancel(sid(op.s), name, requestId, op.reason);
      break;
    }
    case 'lift': {
      const name = nameFor(op.s, op.n, false);
      const current = m.delayRevisionOf(name);
      const delayRevision = op.which === 'current' ? current : current + 1;
      command = { kind: 'LiftLockDelay', name, delayRevision: Revision(delayRevision) };
      expected = m.lift(name, delayRevision);
      break;
    }
    case 'freeze':
    case 'unfreeze':
      command = { kind: op.t === 'freeze' ? 'FreezeNamespace' : 'UnfreezeNamespace', namespace: Namespace(NAMESPACES[op.ns] as string) };
      expected = m.setFrozen(NAMESPACES[op.ns] as string, op.t === 'freeze');
      break;
    case 'noop':
      command = { kind: 'Noop' };
      expected = { ok: true };
      break;
  }
  return { command, expected };
}

/** Everything observable of the real state machine after `result` equals the model's. */
function compareWithModel(op: Op, m: ReferenceModel, r: Real, result: ApplyResult, expected: Obs): void {
  const where = `at index ${m.index}, ${JSON.stringify(op)}`;
  same(normalize(result.outcome), expected, `outcome ${where}`);
  same(result.revision, m.index, `revision ${where}`);
  same(result.events.map(eventString).sort(), [...m.events].sort(), `events ${where}`);
  for (const e of result.events) {
    same(e.revision, m.index, `event revision ${where}`);
    same(e.lock, r.fsm.getLock(e.name), `event lock state ${where}`);
  }
  for (const name of NAMES) {
    const view = m.lockView(name);
    same(realLockView(r.fsm, name), view, `lock ${name} ${where}`);
    const holders = view['holders'] as [string, number, string][];
    const latest = Math.max(0, ...holders.map((h) => h[1]));
    for (const [, token] of holders)
      same(r.fsm.checkToken(name, token), { current: true, latestToken: latest }, `checkToken ${name} ${where}`);
    same(r.fsm.checkToken(name, m.index + 1), { current: false, latestToken: latest }, `checkToken ${name} ${where}`);
  }
  same([...r.fsm.sessions()].map((s) => s.sessionId).sort(), [...m.sessions.keys()].sort(), `sessions ${where}`);
  r.fsm.checkInvariants();
}

class OpCommand implements fc.Command<ReferenceModel, Real> {
  constructor(readonly op: Op) {}
  check(): boolean {
    return true;
  }
  run(m: ReferenceModel, r: Real): void {
    step(this.op, m, r);
  }
  toString(): string {
    return JSON.stringify(this.op);
  }
}

const session = fc.integer({ min: 0, max: SESSIONS.length - 1 });
/** Mostly the first name of a namespace: contention makes queues. */
const nameIndex = fc.constantFrom(0, 0, 0, 1);
/** Mostly the session's own namespace: WRONG_NAMESPACE is one outcome, not the common one. */
const foreign = fc.constantFrom(false, false, false, false, false, false, false, true);
const req = fc.integer({ min: 0, max: 5 });
const mode = fc.constantFrom<Mode>('EXCLUSIVE', 'SHARED');
const cmd = <T extends Op>(arb: fc.Arbitrary<T>) => arb.map((o) => new OpCommand(o));
const acquire = cmd(
  fc.record({
    t: fc.constant('acquire' as const),
    s: session,
    n: nameIndex,
    foreign,
    mode,
    req,
    tryLock: fc.constantFrom(false, false, true),
    delay: fc.constantFrom(0, 0, 500),
  }),
);
const release = cmd(
  fc.record({
    t: fc.constant('release' as const),
    s: session,
    n: nameIndex,
    foreign,
    tok: fc.constantFrom('held' as const, 'held' as const, 'held' as const, 'current' as const, 'stale' as const, 'zero' as const),
  }),
);
const ops = fc.commands(
  [
    acquire,
    acquire,
    acquire,
    acquire,
    acquire,
    release,
    release,
    cmd(fc.record({ t: fc.constant('open' as const), s: session, ttl: fc.constantFrom(1000, 1000, 2000) })),
    cmd(fc.record({ t: fc.constantFrom('close' as const, 'expire' as const), s: session })),
    cmd(
      fc.record({
        t: fc.constant('cancel' as const),
        s: session,
        n: nameIndex,
        foreign,
        req: fc.oneof(fc.constant('waiting' as const), fc.constant('waiting' as const), req),
        reason: fc.constantFrom('timed-out' as const, 'cancelled' as const),
      }),
    ),
    cmd(
      fc.record({
        t: fc.constant('lift' as const),
        s: session,
        n: nameIndex,
        which: fc.constantFrom('current' as const, 'current' as const, 'stale' as const),
      }),
    ),
    // Freezing blocks most commands: keep it rarer than unfreezing.
    cmd(
      fc.record({
        t: fc.constantFrom('freeze' as const, 'unfreeze' as const, 'unfreeze' as const, 'unfreeze' as const),
        ns: fc.integer({ min: 0, max: 1 }),
      }),
    ),
    cmd(fc.constantFrom<Op>({ t: 'noop' }, { t: 'restore' })),
  ],
  { maxCommands: MAX_COMMANDS, size: 'max' },
);

const limitsArb: fc.Arbitrary<ModelLimits> = fc.record({
  sessionsPerNamespaceMax: fc.constantFrom(3, 4, 4, 4),
  locksPerSessionMax: fc.integer({ min: 1, max: 3 }),
  waitersPerLockMax: fc.integer({ min: 1, max: 3 }),
  holdersPerLockMax: fc.integer({ min: 1, max: 3 }),
  dedupePerSessionMax: fc.integer({ min: 1, max: 4 }),
});

describe('model-based: the state machine against the reference lock table', () => {
  it(`matches the reference model on ${RUNS} random histories`, () => {
    fc.assert(
      fc.property(limitsArb, ops, (limits, cmds) => {
        // Every session opened first (as logged entries), so most histories reach the locks at once.
        const setup = () => {
          const model = new ReferenceModel(limits);
          const real: Real = { fsm: new LockStateMachine({ autoClaim: true, limits }), limits };
          for (let s = 0; s < SESSIONS.length; s++) step({ t: 'open', s, ttl: 1000 }, model, real);
          return { model, real };
        };
        fc.modelRun(setup, cmds);
      }),
      { numRuns: RUNS },
    );
  }, 180_000);
});

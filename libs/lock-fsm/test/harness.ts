/**
 * A small driver for tests: one state machine fed through the real entry
 * path (encodeCommand → applyEntry), with an index counter and shorthands
 * for the common commands. Everything applied is kept in `log`, so a test
 * can replay it on another instance.
 */
import { Namespace, RequestId, Revision, type SessionId } from '@fencer/base';
import { makeSessionId } from '@fencer/contract';
import {
  encodeCommand,
  LockStateMachine,
  type AcquireCommand,
  type ApplyResult,
  type Command,
  type LockStateMachineOptions,
  type OutcomeOf,
} from '../src/index.js';

export class Cell {
  readonly fsm: LockStateMachine;
  index: number;
  readonly log: { index: number; data: Uint8Array }[] = [];
  private nextUnique = 0;

  constructor(options: LockStateMachineOptions = { autoClaim: true }, startIndex = 0) {
    this.fsm = new LockStateMachine(options);
    this.index = startIndex;
  }

  run<C extends Command>(command: C): ApplyResult<OutcomeOf[C['kind']]> {
    this.index++;
    const data = encodeCommand(command);
    this.log.push({ index: this.index, data });
    return this.fsm.applyEntry(this.index, data) as ApplyResult<OutcomeOf[C['kind']]>;
  }

  /** Opens a session and returns its id; throws if the state machine refused. */
  open(namespace = 'payments', clientId = 'worker', ttlMs = 10_000): SessionId {
    const sessionId = makeSessionId(Namespace(namespace), `s${++this.nextUnique}`);
    const r = this.run({ kind: 'OpenSession', sessionId, clientId, namespace: Namespace(namespace), ttlMs });
    if (!r.outcome.ok) throw new Error(`OpenSession failed: ${r.outcome.code} ${r.outcome.message}`);
    return sessionId;
  }

  acquire(
    sessionId: SessionId,
    name: string,
    options: Partial<Omit<AcquireCommand, 'kind' | 'sessionId' | 'name' | 'requestId'>> & { requestId?: string } = {},
  ) {
    return this.run({
      kind: 'Acquire',
      sessionId,
      name,
      mode: options.mode ?? 'EXCLUSIVE',
      requestId: RequestId(options.requestId ?? `req-${this.index + 1}`),
      waitMs: options.waitMs ?? 5_000,
      lockDelayMs: options.lockDelayMs ?? 0,
      tryLock: options.tryLock ?? false,
    });
  }

  /** The token of a GRANTED acquire; throws otherwise. */
  grant(sessionId: SessionId, name: string, options: Parameters<Cell['acquire']>[2] = {}): Revision {
    const r = this.acquire(sessionId, name, options);
    if (!r.outcome.ok || r.outcome.status !== 'GRANTED') throw new Error(`expected GRANTED, got ${JSON.stringify(r.outcome)}`);
    return r.outcome.token;
  }

  release(sessionId: SessionId, name: string, token: number) {
    return this.run({ kind: 'Release', sessionId, name, token: Revision(token) });
  }

  close(sessionId: SessionId) {
    return this.run({ kind: 'CloseSession', sessionId });
  }

  expire(sessionId: SessionId) {
    return this.run({ kind: 'ExpireSession', sessionId });
  }

  cancel(sessionId: SessionId, name: string, requestId: string, reason: 'timed-out' | 'cancelled' = 'timed-out') {
    return this.run({ kind: 'CancelWait', sessionId, name, requestId: RequestId(requestId), reason });
  }

  /** Holders as "session:token:mode" and waiters as "session:mode:request", for compact expectations. */
  view(name: string): { holders: string[]; waiters: string[]; delayed: boolean } {
    const s = this.fsm.getLock(name);
    return {
      holders: s.holders.map((h) => `${h.sessionId}:${h.token}:${h.mode[0]}`),
      waiters: s.waiters.map((w) => `${w.sessionId}:${w.mode[0]}:${w.requestId}`),
      delayed: s.delayed,
    };
  }
}

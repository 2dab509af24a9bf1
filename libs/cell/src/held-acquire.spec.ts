/**
 * Goal: a held Acquire's caller is answered exactly once, through one
 * path, whichever of its two inputs (its proposal's outcome, what its
 * WaitingCalls registration gets) comes first: a grant the registry gets
 * before the proposal answers QUEUED is the answer; a caller that gives up
 * is answered CANCELLED once and its wait leaves the registry and the log;
 * a wait that runs out answers QUEUED; a proposal that fails decides even
 * when the registry spoke first; a full registry refuses before anything is
 * proposed; a proposal that completes twice is a bug (an assertion).
 * Method: HeldAcquires over a fake group core whose proposals the test
 * completes by hand, a real WaitingCalls, a lock state machine, and a fake
 * timer queue.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError, FencerError, LogIndex, type Result, Revision, SessionId, Term, err, ok } from '@fencer/base';
import type { GroupCore } from '@fencer/group';
import type { Applied } from '@fencer/replica';
import { type AcquireOutcome, type Command, LockStateMachine, decodeCommand } from '@fencer/lock-fsm';
import type { CellEnv } from './env.js';
import { HeldAcquires } from './held-acquire.js';
import { WAIT_GRACE_MS } from './limits.js';
import { WaitingCalls } from './waiting-calls.js';
import { type AcquireRequest, WIRE_ACQUIRE_STATUS, WIRE_MODE } from './wire.js';

const SESSION = 'ns/0123456789abcdef';
const REQUEST: AcquireRequest = {
  sessionId: SESSION,
  name: '/ls/ns/x',
  mode: WIRE_MODE.EXCLUSIVE,
  waitMs: 1_000,
  requestId: 'r1',
  lockDelayMs: 0,
};

function world(waitingCallsMax = 10) {
  const fsm = new LockStateMachine({ autoClaim: true });
  const proposals: { command: Command; done: (r: Result<Applied, FencerError>) => void }[] = [];
  const timers: { ms: number; run: () => void; live: boolean }[] = [];
  const waits = new WaitingCalls(waitingCallsMax);
  const sideProposals: Command[] = [];
  const core = {
    propose: (data: Uint8Array, done: (r: Result<Applied, FencerError>) => void) => proposals.push({ command: decodeCommand(data), done }),
    replica: { status: () => ({ lastIndex: 7 }) },
  } as unknown as GroupCore;
  const env = {
    after: (ms: number, run: () => void) => {
      const t = { ms, run, live: true };
      timers.push(t);
      return () => (t.live = false);
    },
  } as unknown as CellEnv;
  const acquires = new HeldAcquires({ env, hooks: {}, core, waits, fsm: () => fsm, propose: (c) => sideProposals.push(c) });
  const answers: Result<unknown, FencerError>[] = [];
  const acquire = (req: AcquireRequest = REQUEST) => acquires.acquire(req, (r) => answers.push(r));
  const applied = (outcome: AcquireOutcome): Result<Applied, FencerError> => ok({ index: LogIndex(9), term: Term(2), result: outcome });
  const queued = applied({ ok: true, status: 'QUEUED', position: 0, revision: Revision(9), deduped: false });
  return { proposals, timers, waits, sideProposals, answers, acquire, queued };
}

const statusOf = (r: Result<unknown, FencerError> | undefined): number | string | undefined =>
  r === undefined ? undefined : r.ok ? (r.value as { status: number }).status : r.error.code;

describe('HeldAcquire: one answer, through one path', () => {
  it('a grant the registry gets before the proposal answers QUEUED is the answer, once', () => {
    const w = world();
    w.acquire();
    expect(w.proposals.map((p) => p.command.kind)).toEqual(['Acquire']);
    w.waits.resolve(SessionId(SESSION), REQUEST.requestId as never, { kind: 'granted', token: Revision(11), revision: Revision(11) });
    expect(w.answers).toEqual([]);
    w.proposals[0]!.done(w.queued);
    expect(w.answers.map(statusOf)).toEqual([WIRE_ACQUIRE_STATUS.GRANTED]);
    expect(w.answers[0]!.ok && (w.answers[0]!.value as { token: number }).token).toBe(11);
    expect(w.waits.size).toBe(0);
    expect(w.timers.filter((t) => t.live)).toEqual([]);
  });

  it('a caller that gives up on a queued call is answered CANCELLED once; its wait leaves the registry and the log', () => {
    const w = world();
    const cancel = w.acquire();
    w.proposals[0]!.done(w.queued);
    expect(w.answers).toEqual([]);
    expect(w.timers.map((t) => t.ms)).toEqual([REQUEST.waitMs + WAIT_GRACE_MS]);
    cancel();
    cancel();
    expect(w.answers.map(statusOf)).toEqual(['CANCELLED']);
    expect(w.sideProposals).toMatchObject([{ kind: 'CancelWait', requestId: 'r1', reason: 'cancelled' }]);
    expect(w.waits.size).toBe(0);
    w.waits.resolve(SessionId(SESSION), REQUEST.requestId as never, { kind: 'granted', token: Revision(11), revision: Revision(11) });
    expect(w.answers).toHaveLength(1);
    expect(w.timers.filter((t) => t.live)).toEqual([]);
  });

  it('a queued call whose wait (plus grace) runs out on this node answers QUEUED, and leaves the registry', () => {
    const w = world();
    w.acquire();
    w.proposals[0]!.done(w.queued);
    w.timers[0]!.run();
    expect(w.answers.map(statusOf)).toEqual([WIRE_ACQUIRE_STATUS.QUEUED]);
    expect(w.waits.size).toBe(0);
  });

  it('a proposal that fails decides, even when the registry spoke first (leadership lost while proposing)', () => {
    const w = world();
    w.acquire();
    w.waits.resolveAll({ kind: 'leadership-lost' });
    expect(w.answers).toEqual([]);
    w.proposals[0]!.done(err(new FencerError('OUTCOME_UNKNOWN', 'leadership was lost before the entry applied')));
    expect(w.answers.map(statusOf)).toEqual(['OUTCOME_UNKNOWN']);
  });

  it('a full registry refuses with TOO_MANY_REQUESTS before anything is proposed; a try-lock needs no registration', () => {
    const w = world(0);
    w.acquire();
    expect(w.answers.map(statusOf)).toEqual(['TOO_MANY_REQUESTS']);
    expect(w.proposals).toEqual([]);
    w.acquire({ ...REQUEST, waitMs: 0, requestId: 'r2' });
    expect(w.proposals).toHaveLength(1);
  });

  it('a proposal that completes twice is a bug: an assertion, never a second answer', () => {
    const w = world();
    w.acquire();
    w.proposals[0]!.done(w.queued);
    expect(() => w.proposals[0]!.done(w.queued)).toThrow(AssertionError);
    expect(w.answers).toEqual([]);
  });
});

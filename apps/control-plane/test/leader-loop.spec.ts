/**
 * Goal: leader-only work runs only while this instance leads: a pass starts
 * at once on becoming leader (resuming the journal), then every interval,
 * never two passes of one task at a time; wake() brings the next pass
 * forward; losing leadership aborts the running pass and schedules no more;
 * a failed pass is retried by the next one.
 * Method: a LeaderLoop over a leadership flag the test flips, with tasks
 * that record their passes and resolve when the test says, on Vitest's fake
 * timers: the test moves time forward itself, so "nothing happened within
 * 2 s" is exact and nothing sleeps.
 */
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LEADERSHIP_POLL_MS, LeaderLoop, type LeaderTask } from '../src/workers/leader-loop.js';

const logger = pino({ level: 'silent' });

/** A task whose passes the test drives: each pass waits for release() or its abort. */
class ScriptedTask implements LeaderTask {
  readonly started: number[] = [];
  readonly ended: string[] = [];
  private release: (() => void) | undefined;
  failNext = false;
  constructor(
    readonly name: string,
    readonly intervalMs: number,
  ) {}

  runPass(signal: AbortSignal): Promise<void> {
    this.started.push(performance.now());
    return new Promise((resolve, reject) => {
      const finish = (how: string): void => {
        this.ended.push(how);
        this.release = undefined;
        if (how === 'failed') reject(new Error('planted failure'));
        else resolve();
      };
      this.release = () => finish(this.failNext ? 'failed' : 'ok');
      signal.addEventListener('abort', () => finish('aborted'), { once: true });
    });
  }

  endPass(): void {
    this.release?.();
  }
}

const loops: LeaderLoop[] = [];
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  for (const l of loops.splice(0)) l.close();
  vi.useRealTimers();
});

/** Moves the fake clock forward, running every timer and promise callback due meanwhile. */
const elapse = (ms: number): Promise<void> => vi.advanceTimersByTimeAsync(ms).then(() => undefined);

function loopOf(leadership: { isLeader: boolean }, tasks: LeaderTask[]): LeaderLoop {
  const loop = new LeaderLoop(leadership, tasks, logger);
  loops.push(loop);
  return loop;
}

describe('leader-only tasks', () => {
  it('start a pass at once on becoming leader, and none on a follower', async () => {
    const leadership = { isLeader: false };
    const task = new ScriptedTask('moves', 60_000);
    loopOf(leadership, [task]);
    await elapse(2_000);
    expect(task.started).toHaveLength(0);
    leadership.isLeader = true;
    // The next leadership poll sees it, and the first pass is due at once after that poll.
    await elapse(LEADERSHIP_POLL_MS + 1);
    expect(task.started).toHaveLength(1);
  });

  it('never run two passes of one task at once; wake() brings the next one forward', async () => {
    const task = new ScriptedTask('moves', 60_000);
    const loop = loopOf({ isLeader: true }, [task]);
    await elapse(0);
    loop.wake('moves');
    loop.wake('moves');
    await elapse(2_000);
    expect(task.started, 'a wake during a pass waits for its end').toHaveLength(1);
    task.endPass();
    await elapse(0);
    expect(task.ended).toEqual(['ok']);
    expect(task.started, 'the woken pass starts at once, not after the 60 s interval').toHaveLength(2);
  });

  it('run again after the interval, and retry a failed pass', async () => {
    const task = new ScriptedTask('snapshots', 1_000);
    loopOf({ isLeader: true }, [task]);
    await elapse(0);
    task.failNext = true;
    task.endPass();
    await elapse(999);
    expect(task.started, 'the next pass waits out the interval').toHaveLength(1);
    await elapse(1);
    expect(task.started).toHaveLength(2);
    task.failNext = false;
    task.endPass();
    await elapse(1_000);
    expect(task.started).toHaveLength(3);
    expect(task.ended).toEqual(['failed', 'ok']);
  });

  it('abort the running pass on losing leadership, and schedule no more', async () => {
    const leadership = { isLeader: true };
    const task = new ScriptedTask('moves', 10);
    loopOf(leadership, [task]);
    await elapse(0);
    leadership.isLeader = false;
    await elapse(LEADERSHIP_POLL_MS);
    expect(task.ended).toEqual(['aborted']);
    await elapse(10_000);
    expect(task.started).toHaveLength(1);
  });

  it('refuse two tasks of one name', () => {
    expect(() => loopOf({ isLeader: false }, [new ScriptedTask('a', 1), new ScriptedTask('a', 1)])).toThrow(/two leader tasks named a/);
  });
});

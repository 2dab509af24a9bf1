/**
 * Goal: `fencer lock NAME -- CMD` as documented: the command runs holding
 * the lock with FENCER_LOCK_NAME/FENCER_LOCK_TOKEN in its environment, its
 * exit status is passed through and the lock released afterwards; --wait 0
 * on a held lock exits 75 at once; when the lock is lost (the session
 * expires — or, with --strict, already at jeopardy) the command is stopped
 * with SIGTERM, then SIGKILL after --kill-after, and fencer exits 80; a
 * KeepAlive failover along a leader hint does not disturb it.
 * Method: runCli in-process against the fake LockService; the command is a
 * probe process that reports its environment and the signals it gets over
 * loopback TCP, and exits when told, so the test waits on messages only.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FencerClient } from '@fencer/client';
import { FakeLockService } from '@fencer/client/testing';
import { EXIT, runCli, type CliIo } from '../src/index.js';
import { Probe } from './probe.js';

let fake: FakeLockService;
let probe: Probe;
let other: FencerClient;

beforeAll(async () => {
  fake = await FakeLockService.start();
  probe = await Probe.start();
  other = new FencerClient({ endpoints: [fake.address], clientId: 'other-holder' });
});

afterEach(() => {
  fake.resumeHeartbeats();
});

afterAll(async () => {
  await other.close();
  await probe.stop();
  await fake.stop();
});

function lock(
  args: string[],
  opts: { ignoreTerm?: boolean; signal?: AbortSignal; onErr?: (text: string) => void } = {},
): Promise<{ code: number; err: string }> {
  let err = '';
  const io: CliIo = {
    stdout: () => {},
    stderr: (t) => {
      err += t;
      opts.onErr?.(t);
    },
    env: { ...process.env, FENCER_ENDPOINTS: fake.address, ...probe.env(opts.ignoreTerm) },
    cwd: process.cwd(),
    clientOptions: { backoffBaseMs: 5, backoffMaxMs: 20 },
    childStdio: 'ignore',
    ...(opts.signal ? { signal: opts.signal } : {}),
  };
  return runCli(['lock', ...args, '--', ...probe.command()], io).then((code) => ({ code, err }));
}

describe('fencer lock', () => {
  it('exports the lock name and token to the command, passes its exit status through, releases the lock', async () => {
    const running = lock(['/ls/cli/env']);
    const hello = await probe.next('env');
    const held = fake.locks.get('/ls/cli/env')!.holders;
    expect(held).toHaveLength(1);
    expect(hello.env).toMatchObject({
      FENCER_LOCK_NAME: '/ls/cli/env',
      FENCER_LOCK_TOKEN: String(held[0]!.token),
      FENCER_LOCK_MODE: 'exclusive',
    });
    expect(hello.env!['FENCER_SESSION_ID']).toBe(held[0]!.sessionId);
    probe.exitAll(3);
    const r = await running;
    expect(r.code).toBe(3);
    expect(fake.locks.get('/ls/cli/env')!.holders).toEqual([]);
  });

  it('--wait 0 on a held lock exits 75 at once, naming the holder, without running the command', async () => {
    const h = await other.acquire('/ls/cli/busy');
    const before = probe.messages.length;
    const r = await lock(['/ls/cli/busy', '--wait', '0']);
    expect(r.code).toBe(EXIT.LOCK_BUSY);
    expect(r.err).toMatch(/held \(by other-holder\)/);
    expect(probe.messages.length).toBe(before);
    await h.release();
  });

  it('--shared runs alongside another shared holder', async () => {
    const h = await other.acquire('/ls/cli/sh', { mode: 'shared' });
    const running = lock(['/ls/cli/sh', '--shared', '--wait', '0']);
    const hello = await probe.next('env');
    expect(hello.env!['FENCER_LOCK_MODE']).toBe('shared');
    expect(Number(hello.env!['FENCER_LOCK_TOKEN'])).toBeGreaterThan(h.token);
    probe.exitAll(0);
    expect((await running).code).toBe(0);
    await h.release();
  });

  it('stops the command when the session expires: SIGTERM, exit 80', async () => {
    const running = lock(['/ls/cli/exp', '--ttl', '600ms']);
    const hello = await probe.next('env');
    fake.expireSession(hello.env!['FENCER_SESSION_ID']!);
    const sig = await probe.next('signal');
    expect(sig.signal).toBe('SIGTERM');
    const r = await running;
    expect(r.code).toBe(EXIT.LOCK_LOST);
    expect(r.err).toMatch(/is lost \(the session expired\)/);
  });

  it('escalates to SIGKILL after --kill-after when the command ignores SIGTERM', async () => {
    const running = lock(['/ls/cli/kill', '--ttl', '600ms', '--kill-after', '300ms'], { ignoreTerm: true });
    const hello = await probe.next('env');
    fake.expireSession(hello.env!['FENCER_SESSION_ID']!);
    expect((await probe.next('signal')).signal).toBe('SIGTERM');
    const r = await running; // only SIGKILL can end the probe now
    expect(r.code).toBe(EXIT.LOCK_LOST);
  });

  it('--strict stops the command already at jeopardy', async () => {
    const running = lock(['/ls/cli/strict', '--ttl', '600ms', '--grace', '30s', '--strict']);
    await probe.next('env');
    fake.pauseHeartbeats();
    expect((await probe.next('signal')).signal).toBe('SIGTERM');
    const r = await running;
    expect(r.code).toBe(EXIT.LOCK_LOST);
    expect(r.err).toMatch(/jeopardy, --strict/);
  });

  it('without --strict, jeopardy only warns; the command keeps running once the session is safe again', async () => {
    let stderrSeen = '';
    let onText: (() => void) | undefined;
    const saw = (pattern: RegExp): Promise<void> =>
      new Promise((resolve) => {
        onText = () => {
          if (pattern.test(stderrSeen)) resolve();
        };
        onText();
      });
    const running = lock(['/ls/cli/lenient', '--ttl', '600ms', '--grace', '30s'], {
      onErr: (t) => {
        stderrSeen += t;
        onText?.();
      },
    });
    await probe.next('env');
    fake.pauseHeartbeats();
    await saw(/jeopardy: \/ls\/cli\/lenient may be lost/);
    fake.resumeHeartbeats();
    await saw(/safe again/);
    probe.exitAll(0);
    const r = await running;
    expect(r.code).toBe(0);
    expect(probe.messages.filter((m) => m.kind === 'signal' && !(m as { taken?: boolean }).taken)).toEqual([]);
  });

  it('a KeepAlive failover along a leader hint does not disturb the command', async () => {
    const second = await fake.addPort();
    const running = lock(['/ls/cli/failover', '--ttl', '1500ms']);
    await probe.next('env');
    fake.breakKeepAlives('NOT_LEADER', second);
    // Heartbeats continue on the new stream for more than a TTL (every 500 ms).
    await new Promise<void>((resolve) => {
      let n = 0;
      const on = (): void => {
        if (++n >= 4) {
          fake.off('heartbeat', on);
          resolve();
        }
      };
      fake.on('heartbeat', on);
    });
    probe.exitAll(0);
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.err).not.toMatch(/jeopardy|lost/);
  });

  it('passes an interrupt on to the command and then releases', async () => {
    const ac = new AbortController();
    const running = lock(['/ls/cli/int'], { signal: ac.signal });
    await probe.next('env');
    ac.abort();
    expect((await probe.next('signal')).signal).toBe('SIGINT');
    const r = await running;
    expect(r.code).toBe(130);
    expect(fake.locks.get('/ls/cli/int')!.holders).toEqual([]);
  });

  it('a command that does not exist exits 127 and releases the lock', async () => {
    let err = '';
    const code = await runCli(['lock', '/ls/cli/nocmd', '--', '/nonexistent/command-xyz'], {
      stdout: () => {},
      stderr: (t) => (err += t),
      env: { FENCER_ENDPOINTS: fake.address },
      cwd: process.cwd(),
      childStdio: 'ignore',
    });
    expect(code).toBe(EXIT.COMMAND_NOT_FOUND);
    expect(err).toMatch(/cannot run/);
    expect(fake.locks.get('/ls/cli/nocmd')!.holders).toEqual([]);
  });
});

/**
 * `fencer lock NAME [options] -- CMD ARGS…`: runs a command while holding a
 * lock. The command gets FENCER_LOCK_NAME, FENCER_LOCK_TOKEN (the fencing
 * token to pass to every resource it writes), FENCER_LOCK_MODE and
 * FENCER_SESSION_ID. When the lock is lost — the session expired, or with
 * --strict already at jeopardy — the command is stopped: SIGTERM, then
 * SIGKILL after --kill-after. A leader change within the TTL does not
 * disturb it. The command's own exit status is passed through.
 */
import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { FencerClient, formatDuration, LockTimeoutError, type FencerClientOptions, type LockHandle } from '@fencer/client';
import { EXIT, exitCodeFor } from '../exit-codes.js';
import type { CliIo } from '../io.js';

export interface LockCommandOptions {
  readonly name: string;
  readonly command: readonly string[];
  readonly shared: boolean;
  readonly waitMs: number;
  readonly ttlMs: number;
  readonly graceMs: number;
  readonly strict: boolean;
  readonly killAfterMs: number;
  readonly lockDelayMs: number;
  readonly clientId?: string | undefined;
  readonly json: boolean;
  readonly quiet: boolean;
}

function signalNumber(sig: NodeJS.Signals): number {
  return (osConstants.signals as Record<string, number>)[sig] ?? 0;
}

export async function runLock(
  opts: LockCommandOptions,
  clientOptions: FencerClientOptions,
  io: CliIo,
  interrupt: AbortSignal,
): Promise<number> {
  const say = (event: string, text: string, extra: Record<string, unknown> = {}): void => {
    if (opts.json) io.stderr(`${JSON.stringify({ event, name: opts.name, ...extra })}\n`);
    else if (!opts.quiet || event === 'lost' || event === 'jeopardy' || event === 'error') io.stderr(`fencer: ${text}\n`);
  };
  const client = new FencerClient({
    ...clientOptions,
    ttlMs: opts.ttlMs,
    gracePeriodMs: opts.graceMs,
    ...(opts.clientId ? { clientId: opts.clientId } : {}),
  });
  let handle: LockHandle;
  try {
    handle = await client.acquire(opts.name, {
      mode: opts.shared ? 'shared' : 'exclusive',
      waitMs: opts.waitMs,
      lockDelayMs: opts.lockDelayMs,
      signal: interrupt,
    });
  } catch (e) {
    await client.close();
    if (e instanceof LockTimeoutError) {
      say('busy', e.message, { holders: e.holders, revision: e.revision });
      return EXIT.LOCK_BUSY;
    }
    if (interrupt.aborted) return EXIT.INTERRUPTED;
    say('error', `cannot acquire ${opts.name}: ${(e as Error).message}`, {
      error: (e as Error).message,
      code: (e as { code?: string }).code,
    });
    return exitCodeFor(e);
  }
  say('acquired', `acquired ${opts.name} (${handle.mode}, token ${handle.token}, session ${handle.session.id})`, {
    token: handle.token,
    mode: handle.mode,
    sessionId: handle.session.id,
  });

  const session = handle.session;
  let lost = false;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  let exited = false;
  const [cmd, ...args] = opts.command as [string, ...string[]];
  const child = spawn(cmd, args, {
    stdio: io.childStdio ?? 'inherit',
    env: {
      ...io.env,
      FENCER_LOCK_NAME: opts.name,
      FENCER_LOCK_TOKEN: String(handle.token),
      FENCER_LOCK_MODE: handle.mode,
      FENCER_SESSION_ID: session.id,
    },
  });
  const stop = (why: string): void => {
    if (lost) return;
    lost = true;
    say('lost', `${why}: stopping the command (SIGTERM, then SIGKILL after ${formatDuration(opts.killAfterMs)})`, { reason: why });
    if (exited) return;
    child.kill('SIGTERM');
    killTimer = setTimeout(() => {
      if (!exited) child.kill('SIGKILL');
    }, opts.killAfterMs);
  };
  const onJeopardy = (): void => {
    if (opts.strict) stop(`${opts.name} may be lost (the session is in jeopardy, --strict)`);
    else say('jeopardy', `the session is in jeopardy: ${opts.name} may be lost; retrying for up to ${formatDuration(opts.graceMs)}`);
  };
  const onSafe = (): void => say('safe', `the session is safe again; ${opts.name} is still held`);
  const onExpired = (): void => stop(`${opts.name} is lost (the session expired)`);
  session.on('jeopardy', onJeopardy);
  session.on('safe', onSafe);
  session.on('expired', onExpired);
  // Interrupts go to the command; fencer waits for it, then releases the lock.
  const onInterrupt = (): void => {
    const sig =
      typeof interrupt.reason === 'string' && interrupt.reason.startsWith('SIG') ? (interrupt.reason as NodeJS.Signals) : 'SIGINT';
    if (!exited) child.kill(sig);
  };
  interrupt.addEventListener('abort', onInterrupt, { once: true });
  // A lock already unsafe by the time the command starts.
  if (session.state === 'expired') onExpired();
  else if (session.state === 'jeopardy' && opts.strict) onJeopardy();

  const outcome = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: NodeJS.ErrnoException }>(
    (resolve) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        if (child.pid === undefined) resolve({ code: null, signal: null, spawnError: err });
      });
      child.once('exit', (code, signal) => resolve({ code, signal }));
    },
  );
  exited = true;
  if (killTimer) clearTimeout(killTimer);
  interrupt.removeEventListener('abort', onInterrupt);
  session.off('jeopardy', onJeopardy);
  session.off('safe', onSafe);
  session.off('expired', onExpired);
  const released = await handle.release().catch(() => false);
  await client.close();
  if (outcome.spawnError) {
    const notFound = outcome.spawnError.code === 'ENOENT';
    say('error', `cannot run ${cmd}: ${outcome.spawnError.message}`, { error: outcome.spawnError.message });
    return notFound ? EXIT.COMMAND_NOT_FOUND : EXIT.COMMAND_NOT_EXECUTABLE;
  }
  const status = outcome.code ?? 128 + signalNumber(outcome.signal ?? 'SIGKILL');
  say('done', `the command exited with ${outcome.code ?? outcome.signal}; ${released ? 'released' : 'no longer held'} ${opts.name}`, {
    exit: outcome.code,
    signal: outcome.signal,
    released,
    lost,
  });
  return lost ? EXIT.LOCK_LOST : status;
}

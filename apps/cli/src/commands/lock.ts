/**
 * `fencer lock NAME [options] -- CMD ARGS…`: runs a command while holding a
 * lock. The command gets FENCER_LOCK_NAME, FENCER_LOCK_TOKEN (the fencing
 * token to pass to every resource it writes), FENCER_LOCK_MODE and
 * FENCER_SESSION_ID. When the lock is lost — the session expired, or with
 * --strict already at jeopardy — the command is stopped: SIGTERM, then
 * SIGKILL after --kill-after. A leader change within the TTL does not
 * disturb it. The command's own exit status is passed through.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { type Command, Option } from 'commander';
import { FencerClient, formatDuration, LockTimeoutError, type FencerClientOptions, type LockHandle, type Session } from '@fencer/client';
import { EXIT, exitCodeFor } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { clientOptionsOf, duration, type CliRun, type GlobalOptions } from '../run-context.js';

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

/** Reports one event on stderr: a JSON line with --json, else text (with --quiet, only the bad news). */
type Say = (event: string, text: string, extra?: Record<string, unknown>) => void;

function sayer(opts: LockCommandOptions, io: CliIo): Say {
  return (event, text, extra = {}) => {
    if (opts.json) io.stderr(`${JSON.stringify({ event, name: opts.name, ...extra })}\n`);
    else if (!opts.quiet || event === 'lost' || event === 'jeopardy' || event === 'error') io.stderr(`fencer: ${text}\n`);
  };
}

/** The lock, or the exit code that says why not (the client is closed then). */
async function acquireLock(client: FencerClient, opts: LockCommandOptions, interrupt: AbortSignal, say: Say): Promise<LockHandle | number> {
  try {
    return await client.acquire(opts.name, {
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
}

/** Starts the command with the lock's name, fencing token, mode and session in its environment. */
function spawnUnderLock(opts: LockCommandOptions, handle: LockHandle, io: CliIo): ChildProcess {
  const [cmd, ...args] = opts.command as [string, ...string[]];
  return spawn(cmd, args, {
    stdio: io.childStdio ?? 'inherit',
    env: {
      ...io.env,
      FENCER_LOCK_NAME: opts.name,
      FENCER_LOCK_TOKEN: String(handle.token),
      FENCER_LOCK_MODE: handle.mode,
      FENCER_SESSION_ID: handle.session.id,
    },
  });
}

/**
 * Watches the session while the command runs: stops the command when the lock is lost (SIGTERM, then
 * SIGKILL after --kill-after), and hands an interrupt on to it; fencer waits for the command either way,
 * then releases the lock. detach() once the command exited.
 */
class CommandGuard {
  /** The lock was lost while the command ran: the run exits LOCK_LOST, whatever the command's status. */
  lost = false;
  private exited = false;
  private killTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly child: ChildProcess,
    private readonly session: Session,
    private readonly opts: LockCommandOptions,
    private readonly interrupt: AbortSignal,
    private readonly say: Say,
  ) {
    session.on('jeopardy', this.onJeopardy);
    session.on('safe', this.onSafe);
    session.on('expired', this.onExpired);
    interrupt.addEventListener('abort', this.onInterrupt, { once: true });
    // A lock already unsafe by the time the command starts.
    if (session.state === 'expired') this.onExpired();
    else if (session.state === 'jeopardy' && opts.strict) this.onJeopardy();
  }

  detach(): void {
    this.exited = true;
    if (this.killTimer) clearTimeout(this.killTimer);
    this.interrupt.removeEventListener('abort', this.onInterrupt);
    this.session.off('jeopardy', this.onJeopardy);
    this.session.off('safe', this.onSafe);
    this.session.off('expired', this.onExpired);
  }

  private stop(why: string): void {
    if (this.lost) return;
    this.lost = true;
    this.say('lost', `${why}: stopping the command (SIGTERM, then SIGKILL after ${formatDuration(this.opts.killAfterMs)})`, {
      reason: why,
    });
    if (this.exited) return;
    this.child.kill('SIGTERM');
    this.killTimer = setTimeout(() => {
      if (!this.exited) this.child.kill('SIGKILL');
    }, this.opts.killAfterMs);
  }

  private readonly onJeopardy = (): void => {
    const { name, strict, graceMs } = this.opts;
    if (strict) this.stop(`${name} may be lost (the session is in jeopardy, --strict)`);
    else this.say('jeopardy', `the session is in jeopardy: ${name} may be lost; retrying for up to ${formatDuration(graceMs)}`);
  };
  private readonly onSafe = (): void => this.say('safe', `the session is safe again; ${this.opts.name} is still held`);
  private readonly onExpired = (): void => this.stop(`${this.opts.name} is lost (the session expired)`);
  private readonly onInterrupt = (): void => {
    const reason: unknown = this.interrupt.reason;
    const sig = typeof reason === 'string' && reason.startsWith('SIG') ? (reason as NodeJS.Signals) : 'SIGINT';
    if (!this.exited) this.child.kill(sig);
  };
}

interface CommandOutcome {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly spawnError?: NodeJS.ErrnoException;
}

function commandOutcome(child: ChildProcess): Promise<CommandOutcome> {
  return new Promise((resolve) => {
    child.once('error', (err: NodeJS.ErrnoException) => {
      if (child.pid === undefined) resolve({ code: null, signal: null, spawnError: err });
    });
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/** The exit code of the run: the command's own status (128 + N for signal N), unless the lock was lost or it never ran. */
function exitCodeOfCommand(opts: LockCommandOptions, outcome: CommandOutcome, released: boolean, lost: boolean, say: Say): number {
  if (outcome.spawnError) {
    const notFound = outcome.spawnError.code === 'ENOENT';
    say('error', `cannot run ${opts.command[0]}: ${outcome.spawnError.message}`, { error: outcome.spawnError.message });
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

export async function runLock(
  opts: LockCommandOptions,
  clientOptions: FencerClientOptions,
  io: CliIo,
  interrupt: AbortSignal,
): Promise<number> {
  const say = sayer(opts, io);
  const client = new FencerClient({
    ...clientOptions,
    ttlMs: opts.ttlMs,
    gracePeriodMs: opts.graceMs,
    ...(opts.clientId ? { clientId: opts.clientId } : {}),
  });
  const handle = await acquireLock(client, opts, interrupt, say);
  if (typeof handle === 'number') return handle;
  say('acquired', `acquired ${opts.name} (${handle.mode}, token ${handle.token}, session ${handle.session.id})`, {
    token: handle.token,
    mode: handle.mode,
    sessionId: handle.session.id,
  });
  const child = spawnUnderLock(opts, handle, io);
  const guard = new CommandGuard(child, handle.session, opts, interrupt, say);
  const outcome = await commandOutcome(child);
  guard.detach();
  const released = await handle.release().catch(() => false);
  await client.close();
  return exitCodeOfCommand(opts, outcome, released, guard.lost, say);
}

/** The flags of `fencer lock` as runLock takes them. */
function lockOptionsOf(name: string, command: string[], o: Record<string, unknown>, json: boolean): LockCommandOptions {
  return {
    name,
    command,
    shared: o['shared'] === true,
    waitMs: o['wait'] as number,
    ttlMs: o['ttl'] as number,
    graceMs: o['grace'] as number,
    strict: o['strict'] === true,
    killAfterMs: o['killAfter'] as number,
    lockDelayMs: o['lockDelay'] as number,
    clientId: o['clientId'] as string | undefined,
    json,
    quiet: o['quiet'] === true,
  };
}

const durationOption = (flags: string, description: string, defaultMs: number, shown: string, flag: string): Option =>
  new Option(flags, description).default(defaultMs, shown).argParser(duration(flag));

export function addLockCommand(program: Command, run: CliRun): void {
  program
    .command('lock')
    .description('run a command while holding a lock; it gets FENCER_LOCK_NAME and FENCER_LOCK_TOKEN, and is stopped if the lock is lost')
    .argument('<name>', 'lock name, /ls/<namespace>/<name>')
    .argument('[command...]', 'the command and its arguments, after --')
    .option('--shared', 'take the lock in shared mode (many holders)')
    .addOption(durationOption('--wait <duration>', 'how long to wait for the lock; 0 fails at once when held', 30_000, '30s', '--wait'))
    .addOption(durationOption('--ttl <duration>', 'session TTL (the cell clamps it)', 12_000, '12s', '--ttl'))
    .addOption(
      durationOption(
        '--grace <duration>',
        'grace period of a session in jeopardy before the lock counts as lost',
        45_000,
        '45s',
        '--grace',
      ),
    )
    .option('--strict', 'stop the command already when the session enters jeopardy')
    .addOption(durationOption('--kill-after <duration>', 'after SIGTERM, wait this long before SIGKILL', 10_000, '10s', '--kill-after'))
    .addOption(
      durationOption(
        '--lock-delay <duration>',
        'if this session expires holding the lock, the cell holds it back this long',
        0,
        '0s',
        '--lock-delay',
      ),
    )
    .option('--client-id <id>', 'name of this holder for operators (default host/pid)')
    .option('-q, --quiet', 'print only warnings and errors')
    .addHelpText('after', '\nExample:\n  fencer lock /ls/jobs/nightly --wait 0 -- ./run-nightly.sh --full\n')
    .action(async (name: string, command: string[], o: Record<string, unknown>, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      if (command.length === 0) {
        cmd.error('fencer lock: give the command to run after --, e.g. fencer lock /ls/jobs/x -- ./job.sh', {
          exitCode: EXIT.USAGE,
          code: 'fencer.missingCommand',
        });
      }
      const opts = lockOptionsOf(name, command, o, g.json === true);
      run.setExitCode(await runLock(opts, clientOptionsOf(run, g), run.io, run.interrupt));
    });
}

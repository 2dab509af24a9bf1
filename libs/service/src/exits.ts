/**
 * How a process ends when it must: a bug (an uncaught exception or
 * rejection, a failed assertion) or a storage failure exits 1 after saying
 * why, and a configuration a person got wrong exits 2 with a message they
 * can act on (0 for --help and --version). Tests and the fleet launcher
 * read these exit codes.
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { Logger } from './logger.js';

/** Logs `message` (and `err`) as fatal and exits 1; never returns. */
export type Die = (message: string, err?: unknown) => never;

/** How long writeBeforeExit waits for a reader that takes nothing. */
const STALLED_READER_MS_MAX = 1_000;
/** The nap between two tries at a full pipe. */
const FULL_PIPE_NAP_MS = 2;

/**
 * Writes `text` to `fd` before returning, even when fd is a non-blocking pipe
 * or socket whose buffer is full (EAGAIN): process.stderr.write would queue it
 * and process.exit would drop it. Gives up after a second of a stalled reader.
 */
export function writeBeforeExit(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const giveUpAt = performance.now() + STALLED_READER_MS_MAX;
  for (let off = 0; off < bytes.length;) {
    try {
      off += fs.writeSync(fd, bytes, off);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || performance.now() > giveUpAt) return;
      Atomics.wait(nap, 0, 0, FULL_PIPE_NAP_MS);
    }
  }
}

/**
 * The exit for a bug or a storage failure: `message` logged as fatal, and
 * said on stderr synchronously as well, because an asynchronous logger may
 * still hold the fatal line when process.exit ends the process.
 */
export function fatalExit(logger: Logger, processName: string): Die {
  return (message, err) => {
    logger.fatal({ err: err instanceof Error ? err.stack : err }, message);
    writeBeforeExit(2, `${processName}: ${message}${err instanceof Error ? `: ${err.message}` : ''}\n`);
    process.exit(1);
  };
}

/**
 * An uncaught exception or rejection is a bug: the process exits 1 rather
 * than serve on in an unknown state. Returns the exit, for the process's
 * own fatal cases (a storage failure, a listener it cannot open).
 */
export function exitOnBug(logger: Logger, processName: string): Die {
  const die = fatalExit(logger, processName);
  process.on('uncaughtException', (err) => die('uncaught exception (a bug): exiting', err));
  process.on('unhandledRejection', (err) => die('unhandled rejection (a bug): exiting', err));
  return die;
}

/**
 * The end of a command line that did not parse (a commander error, or the
 * process's own check): exit 0 after --help or --version, else print the
 * message without commander's "error: " and exit 2.
 */
export function exitOnConfigError(processName: string, e: unknown): never {
  const code = (e as { code?: string }).code;
  if (code === 'commander.helpDisplayed' || code === 'commander.version') process.exit(0);
  process.stderr.write(`${processName}: ${(e as Error).message.replace(/^error: /, '')}\n`);
  process.exit(2);
}

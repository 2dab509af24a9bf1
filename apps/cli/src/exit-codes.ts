/**
 * The documented exit codes of `fencer` (also in `fencer --help` and
 * docs/client.md). Chosen from sysexits(3) where one fits, and far from the
 * small numbers commands use, because `fencer lock` passes its command's own
 * status through.
 */
import { FencerError } from '@fencer/base';
import { isRetryable } from '@fencer/protocol';

export const EXIT = {
  /** Success; for `fencer lock`, the command ran to completion under the lock (its own status is passed through). */
  OK: 0,
  /** The service refused the request (bad name, quota, permission) or something unexpected failed. */
  ERROR: 1,
  /** Bad command line (sysexits EX_USAGE). */
  USAGE: 64,
  /** No endpoint answered, or the cell had no leader, within the retry budget (EX_UNAVAILABLE). */
  UNAVAILABLE: 69,
  /** `fencer lock`: the lock was not acquired within --wait; with --wait 0, it is held right now (EX_TEMPFAIL). */
  LOCK_BUSY: 75,
  /** No endpoints configured, or fleet.json unreadable (EX_CONFIG). */
  CONFIG: 78,
  /** `fencer lock`: the lock was lost while the command ran (session expired, or jeopardy with --strict); the command was stopped. */
  LOCK_LOST: 80,
  /** `fencer lock`: the command exists but cannot be run (as in shells). */
  COMMAND_NOT_EXECUTABLE: 126,
  /** `fencer lock`: the command was not found (as in shells). */
  COMMAND_NOT_FOUND: 127,
  /** Interrupted (SIGINT) before the work began. A command killed by signal N exits 128 + N, as in shells. */
  INTERRUPTED: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODES_HELP = `
Exit codes:
  0    success (fencer lock: the command's own exit status is passed through;
       a command killed by signal N gives 128+N)
  1    the service refused the request, or an unexpected error
  64   bad command line
  69   service unavailable: no endpoint answered / no leader within the retry budget
  75   fencer lock: not acquired within --wait (with --wait 0: the lock is held now)
  78   no endpoints configured (--endpoints, FENCER_ENDPOINTS or .fencer/fleet.json)
  80   fencer lock: the lock was lost while the command ran; the command was stopped
  126  fencer lock: the command cannot be executed
  127  fencer lock: the command was not found
  130  interrupted before the work began
`;

/** The exit code for an error a command did not handle itself. */
export function exitCodeFor(error: unknown): ExitCode {
  if (error instanceof FencerError) return isRetryable(error.code) ? EXIT.UNAVAILABLE : EXIT.ERROR;
  return EXIT.ERROR;
}

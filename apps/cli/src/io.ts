/** What a CLI run touches of the outside world, injectable so tests run the CLI in-process. */
import type { FencerClientOptions } from '@fencer/client';

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Interrupts long-running commands as SIGINT would (tests; main uses the process's signals). */
  readonly signal?: AbortSignal;
  /** Install SIGINT/SIGTERM/SIGHUP handlers on the process (main only). */
  readonly handleProcessSignals?: boolean;
  /** Extra client options (tests inject backoffs). */
  readonly clientOptions?: Partial<FencerClientOptions>;
  /** stdio of the command `fencer lock` runs; default 'inherit'. */
  readonly childStdio?: 'inherit' | 'ignore';
}

export function processIo(): CliIo {
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    env: process.env,
    cwd: process.cwd(),
    handleProcessSignals: true,
  };
}

/**
 * The `fencer` command line, as a function: runCli(argv, io) returns the
 * exit code. main.ts only wires the process to it, so tests run the very same
 * code in-process. Each command group adds itself to the program
 * (commands/); this file holds the global options, the interrupt, and the
 * mapping of what escapes a command to an exit code.
 */
import { Command, CommanderError, Option } from 'commander';
import { ConfigError, UsageError } from './config.js';
import { EXIT, EXIT_CODES_HELP, exitCodeFor } from './exit-codes.js';
import type { CliIo } from './io.js';
import { addCellCommands } from './commands/cell.js';
import { addControlPlaneCommands } from './commands/control-plane.js';
import { addInspectCommands } from './commands/inspect.js';
import { addLockCommand } from './commands/lock.js';
import { duration, type CliRun } from './run-context.js';

const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** One interrupt for the whole run: Ctrl-C, SIGTERM, or the test's signal. `stop()` removes the listeners. */
function listenForInterrupts(io: CliIo): { signal: AbortSignal; stop(): void } {
  const interrupt = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    if (!interrupt.signal.aborted) interrupt.abort(sig);
  };
  const onIoAbort = (): void => onSignal('SIGINT');
  io.signal?.addEventListener('abort', onIoAbort, { once: true });
  if (io.handleProcessSignals) for (const s of SIGNALS) process.on(s, onSignal);
  return {
    signal: interrupt.signal,
    stop() {
      io.signal?.removeEventListener('abort', onIoAbort);
      if (io.handleProcessSignals) for (const s of SIGNALS) process.off(s, onSignal);
    },
  };
}

function rootProgram(io: CliIo): Command {
  return new Command('fencer')
    .description('Fencer: distributed locks with fencing tokens.')
    .option('--endpoints <list>', 'lock service endpoints, host:port[,host:port…] (default: $FENCER_ENDPOINTS, then .fencer/fleet.json)')
    .option('--fleet <file>', 'fleet description to read endpoints from (default: $FENCER_FLEET, then .fencer/fleet.json here or above)')
    .option('--json', 'machine-readable output: one JSON object per line')
    .option(
      '--token <token>',
      "bearer token, sent as authorization: Bearer: a tenant's on the lock service; on the control plane a tenant's or the admin's (default: $FENCER_TOKEN; the control-plane commands then read admin-token beside fleet.json)",
    )
    .option('--tls-ca <file>', "TLS to a --secure fleet, trusting this CA's certificates (default: $FENCER_TLS_CA)")
    .option('--tls-cert <file>', "with --tls-key: an operator's certificate, for the cells' admin ports (default: $FENCER_TLS_CERT)")
    .option('--tls-key <file>', 'the key of --tls-cert (default: $FENCER_TLS_KEY)')
    .addOption(
      new Option('--timeout <duration>', 'how long each call keeps retrying while the cell is unavailable')
        .default(30_000, '30s')
        .argParser(duration('--timeout')),
    )
    .addHelpText('after', EXIT_CODES_HELP)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout(s), writeErr: (s) => io.stderr(s) });
}

/** The exit code of an error no command handled: usage (commander), configuration, or the service's. */
function exitCodeOfFailure(e: unknown, io: CliIo): number {
  if (e instanceof CommanderError) {
    if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return EXIT.OK;
    return e.code === 'fencer.missingCommand' ? EXIT.USAGE : e.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
  }
  if (e instanceof ConfigError) {
    io.stderr(`fencer: ${e.message}\n`);
    return EXIT.CONFIG;
  }
  if (e instanceof UsageError) {
    io.stderr(`fencer: ${e.message}\n`);
    return EXIT.USAGE;
  }
  const code = (e as { code?: string }).code;
  io.stderr(`fencer: ${(e as Error).message}${code ? ` (${code})` : ''}\n`);
  return exitCodeFor(e);
}

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let exitCode: number = EXIT.OK;
  const interrupts = listenForInterrupts(io);
  const run: CliRun = { io, interrupt: interrupts.signal, setExitCode: (code) => (exitCode = code) };
  const program = rootProgram(io);
  // The order of `fencer --help`.
  addLockCommand(program, run);
  addInspectCommands(program, run);
  addCellCommands(program, run);
  addControlPlaneCommands(program, run);
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (e) {
    exitCode = exitCodeOfFailure(e, io);
  } finally {
    interrupts.stop();
  }
  return exitCode;
}

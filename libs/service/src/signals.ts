/** A clean stop on SIGTERM or SIGINT: the process's own stop runs once, then the process exits. */
import type { Logger } from './logger.js';

/** After a clean stop, time for an asynchronous logger to write its last lines before the process exits. */
const EXIT_FLUSH_MS = 50;

/**
 * Runs `stop(signal)` once, on the first SIGTERM or SIGINT (a second signal
 * while stopping is ignored). Exits 0 once it resolves and the logger had
 * a moment to flush; exits 1 when it rejects, after logging why.
 */
export function stopOnSignals(logger: Logger, stop: (signal: NodeJS.Signals) => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    stop(signal).then(
      () => {
        logger.flush();
        setTimeout(() => process.exit(0), EXIT_FLUSH_MS);
      },
      (e: unknown) => {
        logger.error({ err: e instanceof Error ? e.stack : String(e) }, 'stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

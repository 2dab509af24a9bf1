/** Structured logs (pino), JSON to stderr, one logger per process with child loggers per part. */
import { pino } from 'pino';

export type Logger = pino.Logger;

export interface LoggerOptions {
  /**
   * Write each line before the call returns. Default: off, an asynchronous
   * destination that batches writes off a busy event loop (the cell node,
   * the router, the proxy); a fatal exit then says its message on stderr
   * synchronously as well (exitOnBug). The control plane logs synchronously:
   * it logs little, and each line is out before its next step.
   */
  readonly sync?: boolean;
  /** Default: FENCER_LOG_LEVEL, else info. */
  readonly level?: string;
}

export function createLogger(name: string, options: LoggerOptions = {}): Logger {
  const level = options.level ?? process.env['FENCER_LOG_LEVEL'] ?? 'info';
  return pino({ name, level, base: { pid: process.pid } }, pino.destination({ dest: 2, sync: options.sync ?? false }));
}

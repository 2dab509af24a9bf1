/** Structured logs (pino), JSON to stderr, one logger per process. */
import { pino } from 'pino';

export type Logger = pino.Logger;

export function createLogger(name: string, level = process.env.FENCER_LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, base: { pid: process.pid } }, pino.destination({ dest: 2, sync: false }));
}

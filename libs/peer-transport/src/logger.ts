/**
 * What the peer transports log through: the two levels they use, in pino's
 * shape (fields first, then the message), so a process passes its pino
 * logger as it is and this library depends on no logging package.
 */
export interface PeerLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

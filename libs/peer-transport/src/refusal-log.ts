/**
 * Warnings for refused peer input (forged, foreign or broken batches), at
 * most one per window. Each refusal is still counted in the process's
 * metrics by reason; the log says what the first one of a window was and how
 * many were left unsaid since the last warning, so a flood of forgeries
 * (one connection each) cannot flood the log or slow the process with it.
 */
import type { PeerLogger } from './logger.js';
import { refusalLogWindowMs } from './limits.js';

export class RefusalLog {
  private lastAt = Number.NEGATIVE_INFINITY;
  private unsaid = 0;

  constructor(
    private readonly logger: Pick<PeerLogger, 'warn'>,
    private readonly windowMs = refusalLogWindowMs,
    private readonly now: () => number = Date.now,
  ) {}

  /** Logs `message` with `fields` unless a warning went out less than a window ago; then only counts it. */
  warn(fields: Record<string, unknown>, message: string): void {
    const t = this.now();
    if (t - this.lastAt < this.windowMs) {
      this.unsaid++;
      return;
    }
    this.logger.warn(this.unsaid > 0 ? { ...fields, refusalsNotLogged: this.unsaid } : fields, message);
    this.lastAt = t;
    this.unsaid = 0;
  }
}

/**
 * What a chaos run's checks found, kept the same way by every mode: the
 * violations by checker, their total (a checker may list fewer than it
 * counted), and how long each checker took.
 */
export class CheckBook {
  readonly violations: Record<string, string[]> = {};
  readonly checkerMs: Record<string, number> = {};
  private total = 0;

  /** Every violation flagged so far, counted as each checker counted them. */
  get violationCount(): number {
    return this.total;
  }

  /** Records `list` under `group`; `total` is how many the checker counted (it may list only the first few). */
  flag(group: string, list: readonly string[], total = list.length): void {
    if (total === 0) return;
    (this.violations[group] ??= []).push(...list);
    this.total += total;
  }

  /** Runs one checker, recording its wall time under `name`. */
  timed<T>(name: string, fn: () => T): T {
    const started = performance.now();
    try {
      return fn();
    } finally {
      this.checkerMs[name] = Math.round(performance.now() - started);
    }
  }
}

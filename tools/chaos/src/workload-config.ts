/**
 * What a worker process runs, handed over in its environment as JSON. Lock
 * names: `/ls/<ns>/l<i>` for the lock workload, `/ls/<counterNamespace>/c<i>`
 * for the fenced counters.
 */
export interface WorkerConfig {
  readonly id: string;
  readonly seed: number;
  readonly historyFile: string;
  /** This worker's proxy for each node, in node order. */
  readonly endpoints: readonly string[];
  /** Node advertised address → this worker's proxy for it (leader hints name advertised addresses). */
  readonly hintMap: Readonly<Record<string, string>>;
  readonly resourceUrl: string;
  readonly ttlMs: number;
  readonly lockNamespaces: readonly string[];
  readonly namesPerNamespace: number;
  readonly counterNamespace: string;
  readonly counterNames: number;
  readonly lockLoops: number;
  readonly counterLoops: number;
  readonly churnLoops: number;
  readonly watchLoops: number;
  /** Time a counter client spends between its read and its write (the window a pause hits). */
  readonly counterWorkMs: readonly [number, number];
  /** Probability that a churn session is abandoned (left to expire) rather than closed. */
  readonly abandonRate: number;
}

export const WORKER_CONFIG_ENV = 'FENCER_CHAOS_WORKER';

export function lockName(ns: string, i: number): string {
  return `/ls/${ns}/l${i}`;
}

export function counterName(ns: string, i: number): string {
  return `/ls/${ns}/c${i}`;
}

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
  /** Where the KeepAlive stream goes, when not to `endpoints` (the moves mode: a session proxy, while calls go to a router). */
  readonly keepAliveEndpoints?: readonly string[];
  /**
   * Calls go through a front end that resends a call whose outcome it lost
   * (the router, after a lost connection or OUTCOME_UNKNOWN): a Release
   * answered ok = false may then follow its own first application, so the
   * history records it as retried (ambiguous), as for this worker's own
   * retries.
   */
  readonly frontEndResends?: boolean;
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

/**
 * A directed fault's client action, asked of one worker over IPC: `open` a
 * session of the probe's own (heartbeated like the others); `acquire-and-read`
 * an exclusive try-lock of a name no loop uses, then GetLock of it at once
 * through the same node. A worker runs the steps one at a time, in the order
 * asked, and answers each with what happened.
 */
export type ProbeStep = 'open' | 'acquire-and-read';

export interface ProbeRequest {
  readonly probe: ProbeStep;
  readonly id: number;
}

export interface ProbeAnswer {
  readonly probeDone: number;
  readonly outcome: string;
}

export function isProbeRequest(m: unknown): m is ProbeRequest {
  return typeof m === 'object' && m !== null && typeof (m as ProbeRequest).id === 'number' && typeof (m as ProbeRequest).probe === 'string';
}

export function isProbeAnswer(m: unknown): m is ProbeAnswer {
  return typeof m === 'object' && m !== null && typeof (m as ProbeAnswer).probeDone === 'number';
}

/** The n-th probe lock of a worker: `/ls/<ns>/probe-<worker>-<n>`, a name no loop uses. */
export function probeName(ns: string, worker: string, n: number): string {
  return `/ls/${ns}/probe-${worker}-${n}`;
}

/**
 * The environment one group member runs in, injected whole: a process wires
 * real timers, sockets and prom-client into it, the simulator virtual time,
 * a simulated network and no-op metrics. Nothing in this library reaches a
 * clock, a timer or the network on its own.
 */
import type { Clock, Random } from '@fencer/base';
import type { Message } from '@fencer/raft';
import type { Logger, Metrics, ReplicaObserver } from '@fencer/replica';

/** Cancels a timer or an in-flight call; calling it twice is harmless. */
export type Cancel = () => void;

/** What the group member reports; a process maps it to its metrics, the simulator ignores it. */
export interface GroupMetrics {
  /** The replica's own counters and histograms. */
  readonly replica: Metrics;
  /** A proposal ended: 'applied' or the error code; `commitSeconds` when applied. */
  proposed(outcome: string, commitSeconds: number | null): void;
  /** A read barrier (ReadIndex round) confirmed after this long. */
  readConfirmed(seconds: number): void;
  leaderChanged(): void;
}

export const noopGroupMetrics: GroupMetrics = {
  replica: { inc() {}, observe() {} },
  proposed() {},
  readConfirmed() {},
  leaderChanged() {},
};

export interface GroupEnv {
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly metrics: GroupMetrics;
  /** Hands Raft messages to the peer transport. Must not call back into the group synchronously. */
  readonly send: (messages: readonly Message[]) => void;
  /** The replica hit a storage error: production exits the process (an fsync is never retried). */
  readonly onFatal: (error: Error) => void;
  /**
   * Runs `run` once after `ms` milliseconds, at most TIMER_DELAY_MS_MAX
   * (longer waits are chained: see timers.ts).
   */
  readonly after: (ms: number, run: () => void) => Cancel;
  /** Extra hooks on the replica (the simulator's checkers); the group keeps its own. */
  readonly observer?: ReplicaObserver;
}

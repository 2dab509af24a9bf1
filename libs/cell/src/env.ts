/**
 * The environment one cell replica runs in, injected whole: the cell node
 * wires real timers, sockets and prom-client into it, the simulator virtual
 * time, a simulated network and no-op metrics. Nothing in this library
 * reaches a clock, a timer or the network on its own.
 */
import type { Clock, Random } from '@fencer/base';
import type { Message } from '@fencer/raft';
import type { Logger, Metrics, ReplicaObserver } from '@fencer/replica';

/** Cancels a timer or an in-flight call; calling it twice is harmless. */
export type Cancel = () => void;

/** What the cell reports; the cell node maps it to prom-client, the simulator ignores it. */
export interface CellMetrics {
  /** The replica's own counters and histograms. */
  readonly replica: Metrics;
  /** A proposal ended: 'applied' or the error code; `commitSeconds` when applied. */
  proposed(outcome: string, commitSeconds: number | null): void;
  /** A read barrier (ReadIndex round) confirmed after this long. */
  readConfirmed(seconds: number): void;
  heartbeatsAnswered(path: 'leader' | 'relayed', count: number): void;
  sessionExpired(): void;
  leaderChanged(): void;
  /** Every tick; `read` builds the figures (a sink that keeps none need not call it). */
  raftStatus(
    read: () => {
      readonly term: number;
      readonly commit: number;
      readonly applied: number;
      readonly isLeader: boolean;
      readonly watchers: number;
    },
  ): void;
  /** About once a second; `read` walks the tables. */
  tableSizes(read: () => { readonly sessions: number; readonly locks: number; readonly waiters: number }): void;
}

export const noopCellMetrics: CellMetrics = {
  replica: { inc() {}, observe() {} },
  proposed() {},
  readConfirmed() {},
  heartbeatsAnswered() {},
  sessionExpired() {},
  leaderChanged() {},
  raftStatus() {},
  tableSizes() {},
};

export interface CellEnv {
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly metrics: CellMetrics;
  /** Hands Raft messages to the peer transport. Must not call back into the cell synchronously. */
  readonly send: (messages: readonly Message[]) => void;
  /** The replica hit a storage error: production exits the process (an fsync is never retried). */
  readonly onFatal: (error: Error) => void;
  /**
   * Runs `run` once after `ms` milliseconds, at most TIMER_DELAY_MS_MAX
   * (longer waits are chained by the cell: see timers.ts).
   */
  readonly after: (ms: number, run: () => void) => Cancel;
  /** Extra hooks on the replica (the simulator's checkers); the cell keeps its own. */
  readonly observer?: ReplicaObserver;
}

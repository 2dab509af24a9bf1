/**
 * The environment one lock cell replica runs in: the group member's
 * (@fencer/group: clock, random, logger, transport send, timers, onFatal),
 * with a metrics sink that also counts the lock layer's work. The cell node
 * wires real timers, sockets and prom-client into it, the simulator virtual
 * time, a simulated network and no-op metrics. Nothing in this library
 * reaches a clock, a timer or the network on its own.
 */
import { type GroupEnv, type GroupMetrics, noopGroupMetrics } from '@fencer/group';

/** What the cell reports; the cell node maps it to prom-client, the simulator ignores it. */
export interface CellMetrics extends GroupMetrics {
  heartbeatsAnswered(path: 'leader' | 'relayed', count: number): void;
  sessionExpired(): void;
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
  ...noopGroupMetrics,
  heartbeatsAnswered() {},
  sessionExpired() {},
  raftStatus() {},
  tableSizes() {},
};

export interface CellEnv extends GroupEnv {
  readonly metrics: CellMetrics;
}

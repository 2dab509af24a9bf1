/**
 * The environment a replica runs in, injected whole: the cell node wires real
 * I/O into it, the simulator fake I/O. Nothing here may reach a clock, a timer
 * or the network on its own; the replica only calls these.
 */
import type { Clock, Random, Term } from '@fencer/base';
import type { Entry, Message, SnapshotMeta, SoftState } from '@fencer/raft';

/** Hands messages to the network. Must not call back into the replica synchronously. */
export interface Transport {
  send(messages: readonly Message[]): void;
}

/** A tiny structured logger (pino-shaped, so the cell node can pass pino's child logger). */
export interface Logger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/**
 * Counters and histograms by name; the cell node maps them to prom-client.
 * A counter may carry labels from a fixed set (replica_messages_dropped_total
 * has `reason`, a DropReason).
 */
export interface Metrics {
  inc(name: string, by?: number, labels?: Readonly<Record<string, string>>): void;
  observe(name: string, value: number): void;
}

export const noopLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};

export const noopMetrics: Metrics = {
  inc() {},
  observe() {},
};

/**
 * Optional hooks for tests and tooling (the simulator's checkers). Called
 * synchronously; they must not call back into the replica.
 */
export interface ReplicaObserver {
  /** Role or leader changed (after the ready that reported it was applied). */
  softStateChanged?(soft: SoftState, term: Term): void;
  /**
   * Every committed entry as it is applied, blank and membership entries
   * included, with its result: the state machine's, the new membership for a
   * membership change, undefined for a blank entry.
   */
  applied?(entry: Entry, result: unknown): void;
  /** A snapshot received from the leader replaced the state machine. */
  snapshotInstalled?(meta: SnapshotMeta): void;
}

export interface ReplicaEnv {
  readonly clock: Clock;
  /** Seeds the Raft core's election jitter (forked once at construction). */
  readonly random: Random;
  readonly transport: Transport;
  readonly logger?: Logger;
  readonly metrics?: Metrics;
  /**
   * The replica hit an fsync error or a storage failure and has stopped
   * itself. Production exits the process (an fsync error is never retried);
   * the simulator crashes the node. Defaults to throwing the error.
   */
  readonly onFatal?: (error: Error) => void;
  readonly observer?: ReplicaObserver;
}

/**
 * The seam between consensus and the application (hashicorp/raft's FSM).
 * The replica hands it committed Normal entries in log order, exactly once
 * per life of the state machine object; after a restart or an installed
 * snapshot it starts again from `restore`.
 */
import type { Entry } from '@fencer/raft';

export interface StateMachine {
  /**
   * Applies one committed command and returns the outcome the proposer
   * receives (a domain outcome: a value, never a throw). Must be
   * deterministic: every replica computes the same result. Blank entries
   * and membership changes never reach it.
   */
  apply(entry: Entry): unknown;
  /** Serialises the whole state as of the last applied entry. */
  snapshot(): Uint8Array;
  /** Replaces the whole state with a snapshot's. */
  restore(data: Uint8Array): void;
}

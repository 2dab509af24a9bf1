/**
 * @fencer/meta-fsm: the control plane's meta state machine, applied by every
 * instance of the meta group. Pure: imports only @fencer/base; no clock,
 * timer, randomness or I/O. The group member that applies it (on
 * @fencer/group's GroupCore) is the separate entry @fencer/meta-fsm/group.
 */
export { MetaStateMachine, META_SNAPSHOT_FORMAT_VERSION, isMetaFailure, type MetaApplied, type MetaOutcome } from './state-machine.js';
export {
  META_COMMAND_FORMAT_VERSION,
  META_COMMAND_KINDS,
  decodeMetaEntry,
  encodeMetaEntry,
  type MetaCommand,
  type MetaCommandKind,
  type MetaEntry,
  type CreateTenantCommand,
  type UpdateTenantCommand,
  type DeleteTenantCommand,
  type RotateTokenCommand,
  type StartMoveCommand,
  type AdvanceMoveCommand,
  type RollBackMoveCommand,
  type RecordSnapshotCommand,
  type FinishSnapshotCommand,
  type DeleteSnapshotCommand,
} from './commands.js';
export {
  META_LIMITS,
  TENANT_NAME_PATTERN,
  OWNER_CHARS_MAX,
  CELL_ID_CHARS_MAX,
  RECORD_ID_CHARS_MAX,
  IDEMPOTENCY_KEY_CHARS_MAX,
  TOKEN_HASH_CHARS_MAX,
  type MetaLimits,
} from './limits.js';
export * from './types.js';
export { MOVE_TIMING, isFinished, isSwitched, nextMoveStep, unavailableMs, type MoveFacts, type MoveStep } from './move-steps.js';

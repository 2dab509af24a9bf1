/**
 * @fencer/lock-fsm: the lock state machine every replica of a cell applies.
 * Pure: imports only @fencer/base; no clock, timer, randomness or I/O.
 */
export {
  LockStateMachine,
  validateNamespaceExport,
  type ApplyResult,
  type LockStateMachineOptions,
  type Outcome,
  type OutcomeOf,
} from './state-machine.js';
export {
  COMMAND_FORMAT_VERSION,
  COMMAND_KIND_CODES,
  NOOP,
  decodeCommand,
  encodeCommand,
  type AcquireCommand,
  type CancelWaitCommand,
  type ClaimNamespaceCommand,
  type CloseSessionCommand,
  type Command,
  type CommandKind,
  type DropNamespaceCommand,
  type ExpireSessionCommand,
  type ExportNamespaceCommand,
  type FreezeNamespaceCommand,
  type ImportNamespaceCommand,
  type LiftLockDelayCommand,
  type NoopCommand,
  type OpenSessionCommand,
  type ReleaseCommand,
  type UnfreezeNamespaceCommand,
  type SetMemberAddressCommand,
  type ForgetMemberCommand,
} from './commands.js';
export {
  LOCK_NAME_ROOT,
  parseLockName,
  parseLockPrefix,
  validateLockName,
  type LockNameProblem,
  type ParsedLockName,
  type ParsedLockPrefix,
} from './names.js';
export { validateCommand, isFailure } from './validate.js';
export {
  LIMITS,
  NAME_BYTES_MAX,
  NAMESPACE_BYTES_MAX,
  REQUEST_ID_BYTES_MAX,
  CLIENT_ID_BYTES_MAX,
  SESSION_ID_BYTES_MAX,
  LOCK_DELAY_MS_MAX,
  TTL_MS_MIN,
  TTL_MS_MAX,
  WAIT_MS_MAX,
  LIST_LOCKS_LIMIT_DEFAULT,
  LIST_LOCKS_LIMIT_MAX,
  MEMBERS_MAX,
  type FsmLimits,
} from './limits.js';
export { SNAPSHOT_FORMAT_VERSION, EXPORT_FORMAT_VERSION } from './state-codec.js';
export { fnv1a64 } from './hash.js';
export { utf8ByteLength } from './codec.js';
export type * from './types.js';

/**
 * @fencer/lock-fsm: the lock state machine every replica of a cell applies.
 * Pure: imports only @fencer/base and @fencer/contract (the lock-name
 * grammar, id formats and fixed limits it enforces); no clock, timer,
 * randomness or I/O.
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
  type ImportStagedNamespaceCommand,
  type StageImportChunkCommand,
  type LiftLockDelayCommand,
  type NoopCommand,
  type OpenSessionCommand,
  type ReleaseCommand,
  type UnfreezeNamespaceCommand,
  type SetMemberAddressCommand,
  type ForgetMemberCommand,
  type SetNamespaceQuotasCommand,
  type FencedCommand,
  FENCED_KINDS,
  type SetNamespaceCredentialsCommand,
} from './commands.js';
export { MOVE_ID_CHARS_MAX, checkMoveFence, type MoveFence } from './move-fence.js';
export { NO_QUOTAS, QUOTA_VALUE_MAX, checkQuotas, type NamespaceQuotas } from './quotas.js';
export {
  CREDENTIAL_HASHES_MAX,
  CREDENTIAL_HASH_CHARS_MAX,
  NO_CREDENTIALS,
  checkCredentials,
  credentialsAdmit,
  type CredentialHash,
  type NamespaceCredentials,
} from './credentials.js';
export { validateCommand, isFailure } from './validate.js';
export { LIMITS, MEMBERS_MAX, type FsmLimits } from './limits.js';
export { SNAPSHOT_FORMAT_VERSION, EXPORT_FORMAT_VERSION } from './state-codec.js';
export { readSnapshotHead, rewriteSnapshotForRestore, type RestoreRewrite, type SnapshotHead } from './restore.js';
export { DecodeError } from './codec.js';
export { fnv1a64 } from './hash.js';
export type * from './types.js';

/**
 * The contract's knowledge, re-exported only for the importers that still
 * take it from here (libs/cell: lock-cell.ts; apps/cell-router: router.ts).
 * Its home is @fencer/contract; drop these once those import it from there.
 */
export {
  CLIENT_ID_BYTES_MAX,
  LIST_LOCKS_LIMIT_DEFAULT,
  LIST_LOCKS_LIMIT_MAX,
  LOCK_DELAY_MS_MAX,
  REQUEST_ID_BYTES_MAX,
  WAIT_MS_MAX,
  parseLockName,
  parseLockPrefix,
  utf8ByteLength,
  validateLockName,
} from '@fencer/contract';

/**
 * The commands of the lock state machine, and their binary encoding.
 *
 * Encoding, format version 1: one byte of format version, one byte of
 * command kind, then the kind's fields in a fixed order (varuints, single
 * bytes, length-prefixed UTF-8 strings and byte strings; see codec.ts).
 * An unknown version or kind, or a malformed body, crashes the replica
 * (hashicorp/raft's FSM does the same): a replica that skipped an entry it
 * does not understand would silently diverge from the others.
 *
 * A new field of an existing kind takes a new format version, and a new
 * kind takes a new kind code; decoders keep reading every version and kind
 * they ever wrote, because old entries stay in the log. (An older binary
 * crashes on either, which is the point: it must not skip an entry.)
 *
 * A move step with a fence (move-fence.ts) is written as kind 21, Fenced:
 * varuint term, string moveId, then the step's own kind code and body. The
 * step keeps its kind in memory, with `fence` set; an unfenced one is
 * written as before.
 */
import { assert, AssertionError, unreachable, type Namespace, type RequestId, type Revision, type SessionId } from '@fencer/base';
import { ByteReader, ByteWriter, DecodeError } from './codec.js';
import type { CancelReason, LockMode } from './types.js';
import { readQuotas, writeQuotas, type NamespaceQuotas } from './quotas.js';
import { readFence, writeFence, type MoveFence } from './move-fence.js';
import { readCredentials, writeCredentials, type NamespaceCredentials } from './credentials.js';

export const COMMAND_FORMAT_VERSION = 1;

export interface OpenSessionCommand {
  readonly kind: 'OpenSession';
  /** Chosen by the leader ("<namespace>:<unique>", the unique part drawn from its random source). */
  readonly sessionId: SessionId;
  readonly clientId: string;
  readonly namespace: Namespace;
  /** Already clamped by the server to its policy. */
  readonly ttlMs: number;
}
export interface CloseSessionCommand {
  readonly kind: 'CloseSession';
  readonly sessionId: SessionId;
}
/** Decided by the leader's deadline tracker: the session had no heartbeat for its TTL. */
export interface ExpireSessionCommand {
  readonly kind: 'ExpireSession';
  readonly sessionId: SessionId;
}
export interface AcquireCommand {
  readonly kind: 'Acquire';
  readonly sessionId: SessionId;
  readonly name: string;
  readonly mode: LockMode;
  readonly requestId: RequestId;
  /** Recorded for the leader's wait-deadline tracker; the state machine never acts on time. */
  readonly waitMs: number;
  readonly lockDelayMs: number;
  /** A try-lock never queues: a busy lock answers TIMED_OUT. The server sets it for wait_ms = 0. */
  readonly tryLock: boolean;
}
export interface ReleaseCommand {
  readonly kind: 'Release';
  readonly sessionId: SessionId;
  readonly name: string;
  readonly token: Revision;
}
/** Decided by the leader (wait deadline passed) or asked for by the client. */
export interface CancelWaitCommand {
  readonly kind: 'CancelWait';
  readonly sessionId: SessionId;
  readonly name: string;
  readonly requestId: RequestId;
  readonly reason: CancelReason;
}
/** Also what an empty entry (Raft's blank entry of a new term) means. */
export interface NoopCommand {
  readonly kind: 'Noop';
}
/**
 * Ends a lock-delay. Carries the revision at which the delay began (from the
 * ExpireSession outcome or `delayedLocks()`), so a lift scheduled for an
 * earlier delay cannot cut a later one short.
 */
export interface LiftLockDelayCommand {
  readonly kind: 'LiftLockDelay';
  readonly name: string;
  readonly delayRevision: Revision;
}
export interface ClaimNamespaceCommand {
  readonly kind: 'ClaimNamespace';
  readonly namespace: Namespace;
}
export interface FreezeNamespaceCommand {
  readonly kind: 'FreezeNamespace';
  readonly namespace: Namespace;
  /** Set when a move's worker sends it: refused (MOVE_FENCED) below the namespace's fence. */
  readonly fence?: MoveFence;
}
export interface UnfreezeNamespaceCommand {
  readonly kind: 'UnfreezeNamespace';
  readonly namespace: Namespace;
  /** Set when a move's worker sends it: refused (MOVE_FENCED) below the namespace's fence. */
  readonly fence?: MoveFence;
}
export interface ExportNamespaceCommand {
  readonly kind: 'ExportNamespace';
  readonly namespace: Namespace;
}
export interface ImportNamespaceCommand {
  readonly kind: 'ImportNamespace';
  readonly namespace: Namespace;
  /** Bytes from an ExportNamespace outcome. */
  readonly data: Uint8Array;
  /** Import as active (serving at once) or frozen (until UnfreezeNamespace). */
  readonly activate: boolean;
  readonly fence?: MoveFence;
}
export interface DropNamespaceCommand {
  readonly kind: 'DropNamespace';
  readonly namespace: Namespace;
  /** Set when a move's worker sends it: refused (MOVE_FENCED) below the namespace's fence. */
  readonly fence?: MoveFence;
}
/**
 * One piece of an export too large for one entry (proposals are at most
 * 1 MiB): the cell keeps the pieces, replicated and in its snapshots, until
 * ImportStagedNamespace imports them as one. `offset` 0 starts over; a piece
 * at an offset already staged is a retry and changes nothing.
 */
export interface StageImportChunkCommand {
  readonly kind: 'StageImportChunk';
  readonly namespace: Namespace;
  /** Size of the whole export. */
  readonly totalBytes: number;
  readonly offset: number;
  readonly data: Uint8Array;
  readonly fence?: MoveFence;
}
/** Imports the export staged by StageImportChunk, exactly as ImportNamespace would; the staged bytes go. */
export interface ImportStagedNamespaceCommand {
  readonly kind: 'ImportStagedNamespace';
  readonly namespace: Namespace;
  readonly totalBytes: number;
  readonly activate: boolean;
  readonly fence?: MoveFence;
}

/**
 * Records where a member of the cell listens (its lock-service gRPC address
 * and its Raft peer address), so every replica, and every future leader,
 * can reach a member added at runtime. Proposed before the membership change
 * that adds the member; kept in snapshots.
 */
export interface SetMemberAddressCommand {
  readonly kind: 'SetMemberAddress';
  readonly id: string;
  readonly address: string;
  readonly peerAddress: string;
}
/**
 * Sets a namespace's tenant quotas (quotas.ts), replacing the ones it had.
 * Sent by the control plane on tenant creation, on a quota change, and again
 * by its ownership reconciler whenever a cell reports other values.
 */
export interface SetNamespaceQuotasCommand {
  readonly kind: 'SetNamespaceQuotas';
  readonly namespace: Namespace;
  readonly quotas: NamespaceQuotas;
}
/**
 * Sets a namespace's token hashes (credentials.ts), replacing the ones it
 * had. Sent by the control plane on tenant creation and token rotation, and
 * again by its ownership reconciler whenever a cell reports others.
 */
export interface SetNamespaceCredentialsCommand {
  readonly kind: 'SetNamespaceCredentials';
  readonly namespace: Namespace;
  readonly credentials: NamespaceCredentials;
}
/** Forgets a removed member's addresses. */
export interface ForgetMemberCommand {
  readonly kind: 'ForgetMember';
  readonly id: string;
}

export type Command =
  | OpenSessionCommand
  | CloseSessionCommand
  | ExpireSessionCommand
  | AcquireCommand
  | ReleaseCommand
  | CancelWaitCommand
  | NoopCommand
  | LiftLockDelayCommand
  | ClaimNamespaceCommand
  | FreezeNamespaceCommand
  | UnfreezeNamespaceCommand
  | ExportNamespaceCommand
  | ImportNamespaceCommand
  | DropNamespaceCommand
  | SetMemberAddressCommand
  | ForgetMemberCommand
  | StageImportChunkCommand
  | ImportStagedNamespaceCommand
  | SetNamespaceQuotasCommand
  | SetNamespaceCredentialsCommand;

export type CommandKind = Command['kind'];

/** The kinds a move's worker sends with a fence. */
export type FencedCommand =
  | FreezeNamespaceCommand
  | UnfreezeNamespaceCommand
  | ImportNamespaceCommand
  | DropNamespaceCommand
  | StageImportChunkCommand
  | ImportStagedNamespaceCommand;
export const FENCED_KINDS: ReadonlySet<CommandKind> = new Set<FencedCommand['kind']>([
  'FreezeNamespace',
  'UnfreezeNamespace',
  'ImportNamespace',
  'DropNamespace',
  'StageImportChunk',
  'ImportStagedNamespace',
]);

/** The wire code of a fenced step's prefix (kind 20 is SetNamespaceCredentials's). */
export const FENCED_KIND_CODE = 21;

/** Wire numbers of the kinds. Never renumber or reuse one: old entries stay in logs. */
export const COMMAND_KIND_CODES = {
  OpenSession: 1,
  CloseSession: 2,
  ExpireSession: 3,
  Acquire: 4,
  Release: 5,
  CancelWait: 6,
  Noop: 7,
  LiftLockDelay: 8,
  ClaimNamespace: 9,
  FreezeNamespace: 10,
  UnfreezeNamespace: 11,
  ExportNamespace: 12,
  ImportNamespace: 13,
  DropNamespace: 14,
  SetMemberAddress: 15,
  ForgetMember: 16,
  StageImportChunk: 17,
  ImportStagedNamespace: 18,
  SetNamespaceQuotas: 19,
  SetNamespaceCredentials: 20,
} as const satisfies Record<CommandKind, number>;

const MODE_CODES = { EXCLUSIVE: 1, SHARED: 2 } as const satisfies Record<LockMode, number>;
const CANCEL_REASON_CODES = { 'timed-out': 1, cancelled: 2 } as const satisfies Record<CancelReason, number>;

export const NOOP: NoopCommand = { kind: 'Noop' };

export function encodeMode(mode: LockMode): number {
  const code = MODE_CODES[mode];
  assert(code !== undefined, `unknown lock mode ${String(mode)}`);
  return code;
}

export function decodeMode(code: number): LockMode {
  if (code === 1) return 'EXCLUSIVE';
  if (code === 2) return 'SHARED';
  throw new AssertionError(`unknown lock mode code ${code}`);
}

/** The entry bytes of a command. Strings must be well-formed (the server validates input first). */
export function encodeCommand(command: Command): Uint8Array {
  const carried = command.kind === 'ImportNamespace' || command.kind === 'StageImportChunk' ? command.data.length : 0;
  const w = new ByteWriter(carried + 128);
  w.u8(COMMAND_FORMAT_VERSION);
  const fence = 'fence' in command ? command.fence : undefined;
  if (fence !== undefined) {
    w.u8(FENCED_KIND_CODE);
    writeFence(w, fence);
  }
  w.u8(COMMAND_KIND_CODES[command.kind]);
  writeBody(w, command);
  return w.finish();
}

function writeBody(w: ByteWriter, command: Command): void {
  switch (command.kind) {
    case 'OpenSession':
      w.string(command.sessionId).string(command.clientId).string(command.namespace).varuint(command.ttlMs);
      break;
    case 'CloseSession':
    case 'ExpireSession':
      w.string(command.sessionId);
      break;
    case 'Acquire':
      w.string(command.sessionId)
        .string(command.name)
        .u8(encodeMode(command.mode))
        .u8(command.tryLock ? 1 : 0)
        .string(command.requestId)
        .varuint(command.waitMs)
        .varuint(command.lockDelayMs);
      break;
    case 'Release':
      w.string(command.sessionId).string(command.name).varuint(command.token);
      break;
    case 'CancelWait':
      w.string(command.sessionId).string(command.name).string(command.requestId).u8(CANCEL_REASON_CODES[command.reason]);
      break;
    case 'Noop':
      break;
    case 'LiftLockDelay':
      w.string(command.name).varuint(command.delayRevision);
      break;
    case 'ClaimNamespace':
    case 'FreezeNamespace':
    case 'UnfreezeNamespace':
    case 'ExportNamespace':
    case 'DropNamespace':
      w.string(command.namespace);
      break;
    case 'ImportNamespace':
      w.string(command.namespace).bool(command.activate).bytes(command.data);
      break;
    case 'SetMemberAddress':
      w.string(command.id).string(command.address).string(command.peerAddress);
      break;
    case 'ForgetMember':
      w.string(command.id);
      break;
    case 'StageImportChunk':
      w.string(command.namespace).varuint(command.totalBytes).varuint(command.offset).bytes(command.data);
      break;
    case 'ImportStagedNamespace':
      w.string(command.namespace).varuint(command.totalBytes).bool(command.activate);
      break;
    case 'SetNamespaceQuotas':
      w.string(command.namespace);
      writeQuotas(w, command.quotas);
      break;
    case 'SetNamespaceCredentials':
      w.string(command.namespace);
      writeCredentials(w, command.credentials);
      break;
    default:
      unreachable(command, 'command kind');
  }
}

/** One reader for every command: decodeCommand is synchronous and never re-entered, and a reader per entry is garbage. */
const NO_BYTES = new Uint8Array(0);
const reader = new ByteReader(NO_BYTES);

/**
 * The command in entry bytes. An empty entry is Raft's blank entry: Noop.
 * Anything this version does not understand is an AssertionError (crash).
 */
export function decodeCommand(data: Uint8Array): Command {
  if (data.length === 0) return NOOP;
  const r = reader;
  try {
    r.reset(data);
    const version = r.u8();
    if (version !== COMMAND_FORMAT_VERSION) throw new AssertionError(`unknown command format version ${version}`);
    const kind = r.u8();
    const command = kind === FENCED_KIND_CODE ? decodeFenced(r) : decodeBody(kind, r);
    r.end();
    return command;
  } catch (e) {
    if (e instanceof DecodeError) throw new AssertionError(`corrupt command entry: ${e.message}`);
    throw e;
  } finally {
    // Drop the reference: the reader must not keep the last entry's bytes alive.
    r.reset(NO_BYTES);
  }
}

/** A fenced step: its fence, then its own kind and body. */
function decodeFenced(r: ByteReader): Command {
  const fence = readFence(r);
  const command = decodeBody(r.u8(), r);
  if (!FENCED_KINDS.has(command.kind)) throw new AssertionError(`a ${command.kind} entry carries no move fence`);
  return { ...command, fence } as Command;
}

function decodeBody(kind: number, r: ByteReader): Command {
  switch (kind) {
    case COMMAND_KIND_CODES.OpenSession:
      return {
        kind: 'OpenSession',
        sessionId: r.recurringString() as SessionId,
        clientId: r.string(),
        namespace: r.string() as Namespace,
        ttlMs: r.varuint(),
      };
    case COMMAND_KIND_CODES.CloseSession:
      return { kind: 'CloseSession', sessionId: r.recurringString() as SessionId };
    case COMMAND_KIND_CODES.ExpireSession:
      return { kind: 'ExpireSession', sessionId: r.recurringString() as SessionId };
    case COMMAND_KIND_CODES.Acquire: {
      const sessionId = r.recurringString() as SessionId;
      const name = r.string();
      const mode = decodeMode(r.u8());
      const flags = r.u8();
      if (flags > 1) throw new AssertionError(`unknown Acquire flags ${flags}`);
      return {
        kind: 'Acquire',
        sessionId,
        name,
        mode,
        requestId: r.string() as RequestId,
        waitMs: r.varuint(),
        lockDelayMs: r.varuint(),
        tryLock: flags === 1,
      };
    }
    case COMMAND_KIND_CODES.Release:
      return { kind: 'Release', sessionId: r.recurringString() as SessionId, name: r.string(), token: r.varuint() as Revision };
    case COMMAND_KIND_CODES.CancelWait: {
      const sessionId = r.recurringString() as SessionId;
      const name = r.string();
      const requestId = r.string() as RequestId;
      const reasonCode = r.u8();
      let reason: CancelReason;
      if (reasonCode === CANCEL_REASON_CODES['timed-out']) reason = 'timed-out';
      else if (reasonCode === CANCEL_REASON_CODES.cancelled) reason = 'cancelled';
      else throw new AssertionError(`unknown CancelWait reason ${reasonCode}`);
      return { kind: 'CancelWait', sessionId, name, requestId, reason };
    }
    case COMMAND_KIND_CODES.Noop:
      return NOOP;
    case COMMAND_KIND_CODES.LiftLockDelay:
      return { kind: 'LiftLockDelay', name: r.string(), delayRevision: r.varuint() as Revision };
    default:
      return decodeCellBody(kind, r);
  }
}

/** The namespace and member commands: what the control plane and the cell's own duties propose. */
function decodeCellBody(kind: number, r: ByteReader): Command {
  switch (kind) {
    case COMMAND_KIND_CODES.ClaimNamespace:
      return { kind: 'ClaimNamespace', namespace: r.string() as Namespace };
    case COMMAND_KIND_CODES.FreezeNamespace:
      return { kind: 'FreezeNamespace', namespace: r.string() as Namespace };
    case COMMAND_KIND_CODES.UnfreezeNamespace:
      return { kind: 'UnfreezeNamespace', namespace: r.string() as Namespace };
    case COMMAND_KIND_CODES.ExportNamespace:
      return { kind: 'ExportNamespace', namespace: r.string() as Namespace };
    case COMMAND_KIND_CODES.ImportNamespace:
      return { kind: 'ImportNamespace', namespace: r.string() as Namespace, activate: r.bool(), data: r.bytes() };
    case COMMAND_KIND_CODES.DropNamespace:
      return { kind: 'DropNamespace', namespace: r.string() as Namespace };
    case COMMAND_KIND_CODES.SetMemberAddress:
      return { kind: 'SetMemberAddress', id: r.string(), address: r.string(), peerAddress: r.string() };
    case COMMAND_KIND_CODES.ForgetMember:
      return { kind: 'ForgetMember', id: r.string() };
    case COMMAND_KIND_CODES.StageImportChunk:
      return {
        kind: 'StageImportChunk',
        namespace: r.string() as Namespace,
        totalBytes: r.varuint(),
        offset: r.varuint(),
        data: r.bytes(),
      };
    case COMMAND_KIND_CODES.ImportStagedNamespace:
      return { kind: 'ImportStagedNamespace', namespace: r.string() as Namespace, totalBytes: r.varuint(), activate: r.bool() };
    case COMMAND_KIND_CODES.SetNamespaceQuotas:
      return { kind: 'SetNamespaceQuotas', namespace: r.string() as Namespace, quotas: readQuotas(r) };
    case COMMAND_KIND_CODES.SetNamespaceCredentials:
      return { kind: 'SetNamespaceCredentials', namespace: r.string() as Namespace, credentials: readCredentials(r) };
    default:
      throw new AssertionError(`unknown command kind ${kind}`);
  }
}

/**
 * The commands of the meta group's log, and their codec.
 *
 * An entry is the command as JSON with every non-ASCII character escaped
 * (\uXXXX), so its bytes are its characters: no UTF-8 encoder is needed in
 * this pure lib (it compiles without DOM or Node type libraries), and every
 * replica writes the same bytes for the same value. The meta group writes a
 * few entries per operator action, so compactness does not matter here.
 */
import { AssertionError } from '@fencer/base';
import type { MoveState, Quotas, SnapshotState } from './types.js';

export const META_COMMAND_FORMAT_VERSION = 1;

export interface CreateTenantCommand {
  readonly kind: 'CreateTenant';
  readonly namespace: string;
  readonly cell: string;
  readonly owner?: string;
  readonly quotas?: Quotas;
  /** Hash of the tenant token handed out once (when auth is on). */
  readonly tokenHash?: string;
  readonly atMs: number;
}
export interface UpdateTenantCommand {
  readonly kind: 'UpdateTenant';
  readonly namespace: string;
  readonly quotas: Quotas;
}
export interface DeleteTenantCommand {
  readonly kind: 'DeleteTenant';
  readonly namespace: string;
}
export interface RotateTokenCommand {
  readonly kind: 'RotateToken';
  readonly namespace: string;
  readonly tokenHash: string;
  /** The previous hashes stay valid until atMs + graceMs (0: they stop at once). */
  readonly graceMs: number;
  readonly atMs: number;
}
export interface StartMoveCommand {
  readonly kind: 'StartMove';
  readonly id: string;
  readonly namespace: string;
  readonly toCell: string;
  readonly atMs: number;
}
export interface AdvanceMoveCommand {
  readonly kind: 'AdvanceMove';
  readonly id: string;
  readonly state: MoveState;
  readonly error?: string;
  readonly atMs: number;
  /** Figures learned by the step just done (MOVE_FIGURES): the freeze's revision, what was carried, the unavailability. */
  readonly revision?: number;
  readonly sessions?: number;
  readonly locks?: number;
  readonly unavailableMs?: number;
}
/**
 * Starts giving a move back to its source (before its switch): from here
 * the move can only end 'failed', so a rollback is decided in the log
 * before any cell is touched (docs/decisions/0019-the-move-worker.md).
 */
export interface RollBackMoveCommand {
  readonly kind: 'RollBackMove';
  readonly id: string;
  readonly error: string;
  readonly atMs: number;
}
export interface RecordSnapshotCommand {
  readonly kind: 'RecordSnapshot';
  readonly id: string;
  readonly cell: string;
  readonly atMs: number;
}
export interface FinishSnapshotCommand {
  readonly kind: 'FinishSnapshot';
  readonly id: string;
  readonly state: Exclude<SnapshotState, 'uploading'>;
  readonly index?: number;
  readonly bytes?: number;
  readonly sha256?: string;
  readonly location?: string;
  readonly error?: string;
}

/**
 * Retention forgets a finished snapshot once its objects are deleted
 * (docs/decisions/0014-snapshots-in-object-storage.md); an uploading one
 * is never forgotten this way.
 */
export interface DeleteSnapshotCommand {
  readonly kind: 'DeleteSnapshot';
  readonly id: string;
}

export type MetaCommand =
  | CreateTenantCommand
  | UpdateTenantCommand
  | DeleteTenantCommand
  | RotateTokenCommand
  | StartMoveCommand
  | AdvanceMoveCommand
  | RollBackMoveCommand
  | RecordSnapshotCommand
  | FinishSnapshotCommand
  | DeleteSnapshotCommand;

export type MetaCommandKind = MetaCommand['kind'];

export const META_COMMAND_KINDS: readonly MetaCommandKind[] = [
  'CreateTenant',
  'UpdateTenant',
  'DeleteTenant',
  'RotateToken',
  'StartMove',
  'AdvanceMove',
  'RollBackMove',
  'RecordSnapshot',
  'FinishSnapshot',
  'DeleteSnapshot',
];

/**
 * A write as the log carries it: the command and, when the client sent an
 * Idempotency-Key, that key with a fingerprint of the request, so that a
 * retry landing on another leader still gets the first answer.
 */
export interface MetaEntry {
  readonly command: MetaCommand;
  readonly idempotency?: { readonly key: string; readonly fingerprint: string };
}

/** JSON text with every character above 0x7e escaped, so one character is one byte. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function asciiBytes(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x7e) throw new AssertionError(`asciiBytes: character ${c} at ${i} is not ASCII`);
    out[i] = c;
  }
  return out;
}

/** The text of bytes written by asciiBytes; undefined when a byte is not ASCII. */
export function asciiText(bytes: Uint8Array): string | undefined {
  let text = '';
  const chunk = 4096;
  for (let i = 0; i < bytes.length; i += chunk) {
    const part = bytes.subarray(i, i + chunk);
    for (const b of part) if (b > 0x7e) return undefined;
    text += String.fromCharCode(...part);
  }
  return text;
}

export function encodeMetaEntry(entry: MetaEntry): Uint8Array {
  return asciiBytes(asciiJson({ v: META_COMMAND_FORMAT_VERSION, ...entry }));
}

/**
 * Decodes a log entry. A corrupt entry (not ASCII JSON, another format
 * version, an unknown kind) is an AssertionError: the log is ours, so this is
 * a bug or a corrupt disk, and a replica must not guess. Field values are
 * checked by apply, which refuses bad ones as outcomes.
 */
export function decodeMetaEntry(bytes: Uint8Array): MetaEntry {
  const text = asciiText(bytes);
  if (text === undefined) throw new AssertionError('meta entry is not ASCII JSON');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new AssertionError(`meta entry is not JSON: ${(e as Error).message}`);
  }
  if (typeof value !== 'object' || value === null) throw new AssertionError('meta entry is not an object');
  const v = value as { v?: unknown; command?: { kind?: unknown }; idempotency?: MetaEntry['idempotency'] };
  if (v.v !== META_COMMAND_FORMAT_VERSION)
    throw new AssertionError(`meta entry format ${String(v.v)} is not ${META_COMMAND_FORMAT_VERSION}`);
  if (typeof v.command !== 'object' || v.command === null || !META_COMMAND_KINDS.includes(v.command.kind as MetaCommandKind)) {
    throw new AssertionError(`meta entry has an unknown command kind ${String(v.command?.kind)}`);
  }
  return v.idempotency === undefined
    ? { command: v.command as MetaCommand }
    : { command: v.command as MetaCommand, idempotency: v.idempotency };
}

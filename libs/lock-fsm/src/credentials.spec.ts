/**
 * Goal: tenant credentials (docs/decisions/0016-tenant-credentials-and-mtls.md)
 * are replicated state: SetNamespaceCredentials stores a namespace's token
 * hashes (expiry as a wall-clock value, never compared on apply), a frozen
 * namespace refuses them, they survive snapshots, travel with the namespace
 * in its export, and an export of format 3 (no credentials) still imports.
 * credentialsAdmit is the comparison the cell makes with its own clock.
 * Method: harness cells fed through the real entry path; one cell exports to
 * another; the encoded command round-trips; bad lists are refused.
 */
import { describe, expect, it } from 'vitest';
import { Namespace } from '@fencer/base';
import { Cell } from '../test/harness.js';
import {
  CREDENTIAL_HASHES_MAX,
  EXPORT_FORMAT_VERSION,
  LockStateMachine,
  NO_CREDENTIALS,
  credentialsAdmit,
  decodeCommand,
  encodeCommand,
  type NamespaceCredentials,
} from './index.js';

const NS = Namespace('payments');
const CURRENT = { hash: 'sha256:new', validUntilMs: 0 };
const GRACE = { hash: 'sha256:old', validUntilMs: 10_000 };

function setCredentials(cell: Cell, credentials: NamespaceCredentials, namespace = NS) {
  return cell.run({ kind: 'SetNamespaceCredentials', namespace, credentials });
}

describe('tenant credentials in the lock state machine', () => {
  it('stores the hashes of an owned namespace; the same list again changes nothing; an empty list clears them', () => {
    const cell = new Cell({ autoClaim: false });
    expect(setCredentials(cell, [CURRENT]).outcome).toMatchObject({ ok: false, code: 'NAMESPACE_NOT_HERE' });
    cell.run({ kind: 'ClaimNamespace', namespace: NS });
    expect(cell.fsm.namespaceCredentials('payments')).toEqual(NO_CREDENTIALS);
    expect(setCredentials(cell, [CURRENT, GRACE]).outcome).toEqual({ ok: true, changed: true });
    expect(setCredentials(cell, [CURRENT, GRACE]).outcome).toEqual({ ok: true, changed: false });
    expect(cell.fsm.namespaceCredentials('payments')).toEqual([CURRENT, GRACE]);
    expect(cell.fsm.namespaceInfo('payments')?.credentials).toEqual([CURRENT, GRACE]);
    expect(cell.fsm.namespaceCredentials('billing')).toBeUndefined();
    expect(setCredentials(cell, []).outcome).toEqual({ ok: true, changed: true });
    expect(cell.fsm.namespaceCredentials('payments')).toEqual(NO_CREDENTIALS);
    cell.fsm.checkInvariants();
  });

  it('admits a listed hash until its validUntilMs, the current one (0) always, nothing else', () => {
    const list: NamespaceCredentials = [CURRENT, GRACE];
    expect(credentialsAdmit(list, 'sha256:new', 1e13)).toBe(true);
    expect(credentialsAdmit(list, 'sha256:old', 9_999)).toBe(true);
    expect(credentialsAdmit(list, 'sha256:old', 10_000)).toBe(false);
    expect(credentialsAdmit(list, 'sha256:other', 0)).toBe(false);
    expect(credentialsAdmit(NO_CREDENTIALS, 'sha256:new', 0)).toBe(false);
  });

  it('travels with the namespace: refused while frozen, then export, import into another cell, and snapshot restore keep the hashes', () => {
    const source = new Cell({ autoClaim: false });
    source.run({ kind: 'ClaimNamespace', namespace: NS });
    setCredentials(source, [CURRENT, GRACE]);
    source.open('payments');
    source.run({ kind: 'FreezeNamespace', namespace: NS });
    expect(setCredentials(source, [{ hash: 'sha256:later', validUntilMs: 0 }]).outcome).toMatchObject({
      ok: false,
      code: 'NAMESPACE_MOVING',
    });
    const out = source.run({ kind: 'ExportNamespace', namespace: NS }).outcome;
    if (!out.ok) throw new Error(out.code);
    expect(out.data[0]).toBe(EXPORT_FORMAT_VERSION);
    const target = new Cell({ autoClaim: false }, 5000);
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: out.data, activate: true }).outcome).toMatchObject({ ok: true });
    expect(target.fsm.namespaceCredentials('payments')).toEqual([CURRENT, GRACE]);
    const restored = LockStateMachine.restore(target.fsm.snapshot(), { autoClaim: false });
    expect(restored.namespaceCredentials('payments')).toEqual([CURRENT, GRACE]);
    expect(restored.stateHash()).toBe(target.fsm.stateHash());
    restored.checkInvariants();
  });

  it('still imports an export of format 3 (no credentials): the namespace arrives with none', () => {
    const source = new Cell();
    source.open('payments');
    source.run({ kind: 'FreezeNamespace', namespace: NS });
    const out = source.run({ kind: 'ExportNamespace', namespace: NS }).outcome;
    if (!out.ok) throw new Error(out.code);
    // Format 4 = format 3 with the move fence's flag and a credential count (here 0, 0) after the three quota
    // varuints; drop them to get format 3.
    const v4 = out.data;
    const head = 1 + 1 + v4[1]! + varuintLength(v4, 2 + v4[1]!);
    const quotasEnd = head + varuintLength(v4, head) + 3;
    expect([...v4.subarray(quotasEnd, quotasEnd + 2)]).toEqual([0, 0]);
    const v3 = new Uint8Array([3, ...v4.subarray(1, quotasEnd), ...v4.subarray(quotasEnd + 2)]);
    const target = new Cell({ autoClaim: false });
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: v3, activate: true }).outcome).toMatchObject({
      ok: true,
      sessions: 1,
    });
    expect(target.fsm.namespaceCredentials('payments')).toEqual(NO_CREDENTIALS);
  });

  it('refuses malformed lists without changing anything', () => {
    const cell = new Cell({ autoClaim: false });
    cell.run({ kind: 'ClaimNamespace', namespace: NS });
    setCredentials(cell, [CURRENT]);
    const tooMany = Array.from({ length: CREDENTIAL_HASHES_MAX + 1 }, (_, i) => ({ hash: `sha256:${i}`, validUntilMs: 0 }));
    const bads: unknown[] = [
      tooMany,
      [{ hash: '', validUntilMs: 0 }],
      [{ hash: 'has space', validUntilMs: 0 }],
      [{ hash: 'x', validUntilMs: -1 }],
      [{ hash: 'x', validUntilMs: 1.5 }],
      'nope',
    ];
    for (const credentials of bads) {
      // Some cannot even be encoded, so they go straight to apply.
      const command = { kind: 'SetNamespaceCredentials', namespace: NS, credentials } as never;
      expect(cell.fsm.apply(++cell.index, command).outcome).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    }
    expect(cell.fsm.namespaceCredentials('payments')).toEqual([CURRENT]);
  });

  it('encodes and decodes the command', () => {
    const command = {
      kind: 'SetNamespaceCredentials',
      namespace: NS,
      credentials: [CURRENT, { hash: 'sha256:old', validUntilMs: 1_764_000_000_000 }],
    } as const;
    expect(decodeCommand(encodeCommand(command))).toEqual(command);
  });
});

function varuintLength(bytes: Uint8Array, at: number): number {
  let n = 0;
  while ((bytes[at + n] as number) >= 0x80) n++;
  return n + 1;
}

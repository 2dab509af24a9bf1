/**
 * Goal: a tenant move's cell steps are fenced
 * (docs/decisions/0019-the-move-worker.md): a step carrying an older meta
 * term, or the same term and an older journal index, than one the cell
 * applied for the namespace is refused MOVE_FENCED and changes nothing; the fence is kept per namespace across a drop, in
 * snapshots, through a disaster-restore rewrite, and travels with the
 * export; a fenced entry's encoding round-trips, and a fence on a kind that
 * takes none crashes the decoder.
 * Method: harness cells fed through the real entry path; outcomes, fences
 * and state checked after each step.
 */
import { describe, expect, it } from 'vitest';
import { Namespace } from '@fencer/base';
import { Cell } from '../test/harness.js';
import {
  COMMAND_FORMAT_VERSION,
  COMMAND_KIND_CODES,
  decodeCommand,
  encodeCommand,
  LockStateMachine,
  rewriteSnapshotForRestore,
  validateCommand,
  type Command,
  type MoveFence,
} from './index.js';

const NS = Namespace('payments');
const f = (term: number, moveId = `mv-${term}`, journalIndex = 10): MoveFence => ({ term, journalIndex, moveId });

function claimed(): Cell {
  const cell = new Cell({ autoClaim: false });
  expect(cell.run({ kind: 'ClaimNamespace', namespace: NS }).outcome).toMatchObject({ ok: true });
  return cell;
}

describe('move fences', () => {
  it('refuses a step with an older term, changing nothing; the same fence or a newer one acts', () => {
    const cell = claimed();
    expect(cell.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(3) }).outcome).toEqual({ ok: true, changed: true });
    expect(cell.fsm.moveFence(NS)).toEqual(f(3));
    const before = cell.fsm.namespaceInfo(NS);
    const stale = cell.run({ kind: 'UnfreezeNamespace', namespace: NS, fence: f(2) }).outcome;
    expect(stale).toMatchObject({ ok: false, code: 'MOVE_FENCED' });
    expect(stale.ok ? '' : stale.message).toMatch(
      /move mv-2 \(meta term 2, journal index 10\).*move mv-3 \(meta term 3, journal index 10\)/,
    );
    // Nothing changed but the applied index: the namespace as it was (its last revision too), the fence as it was.
    expect(cell.fsm.namespaceInfo(NS)).toEqual(before);
    expect(cell.fsm.moveFence(NS)).toEqual(f(3));
    expect(cell.run({ kind: 'DropNamespace', namespace: NS, fence: f(2) }).outcome).toMatchObject({ code: 'MOVE_FENCED' });
    expect(cell.fsm.namespaceInfo(NS)?.state).toBe('frozen');
    // A repeat of the same step acts (idempotent by its effect); the same leader's next state, or next move, takes the record.
    expect(cell.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(3) }).outcome).toEqual({ ok: true, changed: false });
    expect(cell.run({ kind: 'UnfreezeNamespace', namespace: NS, fence: f(3, 'mv-next', 20) }).outcome).toMatchObject({ ok: true });
    expect(cell.fsm.moveFence(NS)).toEqual(f(3, 'mv-next', 20));
    expect(cell.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(9) }).outcome).toMatchObject({ ok: true, changed: true });
    expect(cell.fsm.moveFence(NS)).toEqual(f(9));
    cell.fsm.checkInvariants();
  });

  it('within one term, a step decided from an earlier journal state arrives late: refused (the previous move’s unfreeze after the next one’s freeze)', () => {
    const cell = claimed();
    expect(cell.run({ kind: 'UnfreezeNamespace', namespace: NS, fence: f(6, 'mv-3', 200) }).outcome).toMatchObject({ ok: true });
    expect(cell.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(6, 'mv-4', 230) }).outcome).toEqual({ ok: true, changed: true });
    expect(cell.run({ kind: 'UnfreezeNamespace', namespace: NS, fence: f(6, 'mv-3', 200) }).outcome).toMatchObject({
      ok: false,
      code: 'MOVE_FENCED',
    });
    expect(cell.fsm.namespaceInfo(NS)?.state).toBe('frozen');
    // A newer term wins whatever its index (a new leader's journal reads at least as far).
    expect(cell.run({ kind: 'UnfreezeNamespace', namespace: NS, fence: f(7, 'mv-4', 230) }).outcome).toMatchObject({ ok: true });
  });

  it('unfenced steps (an operator, old log entries) act whatever the fence, and leave it as it was', () => {
    const cell = claimed();
    cell.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(4) });
    expect(cell.run({ kind: 'UnfreezeNamespace', namespace: NS }).outcome).toEqual({ ok: true, changed: true });
    expect(cell.fsm.moveFence(NS)).toEqual(f(4));
  });

  it('a fenced step on a namespace the cell does not hold still records its fence: a stale import after it is refused', () => {
    const target = new Cell({ autoClaim: false });
    const source = claimed();
    source.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(5, 'mv-a') });
    const out = source.run({ kind: 'ExportNamespace', namespace: NS }).outcome;
    if (!out.ok) throw new Error(out.code);
    // The new leader (term 6) rolled the move back: its drop of the target's copy found none.
    expect(target.run({ kind: 'DropNamespace', namespace: NS, fence: f(6, 'mv-a') }).outcome).toMatchObject({
      code: 'NAMESPACE_NOT_HERE',
    });
    expect(target.fsm.moveFence(NS)).toEqual(f(6, 'mv-a'));
    // The deposed leader's import, and its staged pieces, arrive late: refused, nothing imported or staged.
    const late = { namespace: NS, fence: f(5, 'mv-a') };
    expect(target.run({ kind: 'ImportNamespace', ...late, data: out.data, activate: false }).outcome).toMatchObject({
      code: 'MOVE_FENCED',
    });
    const stage = { kind: 'StageImportChunk', ...late, totalBytes: out.data.length, offset: 0, data: out.data } as const;
    expect(target.run(stage).outcome).toMatchObject({ code: 'MOVE_FENCED' });
    expect(target.fsm.namespaceInfo(NS)).toBeUndefined();
    expect(
      target.run({ kind: 'ImportNamespace', namespace: NS, fence: f(6, 'mv-b'), data: out.data, activate: false }).outcome,
    ).toMatchObject({ ok: true });
  });

  it('travels with the export: the importing cell keeps the higher of its own fence and the source’s', () => {
    const source = claimed();
    source.open('payments');
    source.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(7, 'mv-x') });
    const read = source.fsm.readExport(NS, f(7, 'mv-x'));
    if (!read.ok) throw new Error(read.code);
    expect(source.fsm.readExport(NS, f(6, 'mv-old'))).toMatchObject({ ok: false, code: 'MOVE_FENCED' });
    expect(source.fsm.exportBytes(NS)).toBe(read.data.length);
    const target = new Cell({ autoClaim: false }, 1000);
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: read.data, activate: false }).outcome).toMatchObject({ ok: true });
    expect(target.fsm.moveFence(NS)).toEqual(f(7, 'mv-x'));
    expect(target.run({ kind: 'UnfreezeNamespace', namespace: NS, fence: f(6) }).outcome).toMatchObject({ code: 'MOVE_FENCED' });
    // A lower fence in the export does not lower the target's.
    const t2 = new Cell({ autoClaim: false }, 2000);
    t2.run({ kind: 'DropNamespace', namespace: NS, fence: f(8, 'mv-y') });
    expect(t2.run({ kind: 'ImportNamespace', namespace: NS, fence: f(8, 'mv-y'), data: read.data, activate: false }).outcome).toMatchObject(
      { ok: true },
    );
    expect(t2.fsm.moveFence(NS)).toEqual(f(8, 'mv-y'));
  });

  it('survives a drop (on the tombstone), a snapshot restore and a disaster-restore rewrite', () => {
    const cell = claimed();
    cell.run({ kind: 'FreezeNamespace', namespace: NS, fence: f(2) });
    cell.run({ kind: 'DropNamespace', namespace: NS, fence: f(3) });
    cell.run({ kind: 'DropNamespace', namespace: Namespace('absent'), fence: f(4, 'mv-z') });
    const restored = LockStateMachine.restore(cell.fsm.snapshot(), { autoClaim: false });
    expect(restored.moveFence(NS)).toEqual(f(3));
    expect(restored.moveFence('absent')).toEqual(f(4, 'mv-z'));
    expect(restored.stateHash()).toBe(cell.fsm.stateHash());
    restored.checkInvariants();
    const members = new Map([['n1', { address: '127.0.0.1:7001', peerAddress: '127.0.0.1:8001' }]]);
    const rewritten = LockStateMachine.restore(rewriteSnapshotForRestore(cell.fsm.snapshot(), { revisionRaise: 10, members }), {
      autoClaim: false,
    });
    expect(rewritten.moveFence(NS)).toEqual(f(3));
  });

  it('encodes a fenced step as kind 21 around the step, and reads it back', () => {
    const commands: Command[] = [
      { kind: 'FreezeNamespace', namespace: NS, fence: f(12, 'b6f0c3a2-move') },
      { kind: 'DropNamespace', namespace: NS, fence: f(1) },
      { kind: 'ImportStagedNamespace', namespace: NS, totalBytes: 9, activate: true, fence: f(2 ** 40) },
      { kind: 'StageImportChunk', namespace: NS, totalBytes: 9, offset: 3, data: Uint8Array.of(1, 2), fence: f(3) },
    ];
    for (const c of commands) {
      const bytes = encodeCommand(c);
      expect([bytes[0], bytes[1]]).toEqual([COMMAND_FORMAT_VERSION, 21]);
      expect(decodeCommand(bytes)).toEqual(c);
    }
    const plain = encodeCommand({ kind: 'FreezeNamespace', namespace: NS });
    expect(plain[1]).toBe(COMMAND_KIND_CODES.FreezeNamespace);
    expect(decodeCommand(plain)).toEqual({ kind: 'FreezeNamespace', namespace: NS });
  });

  it('a fence around a kind that takes none, or a malformed fence, crashes the decoder (an entry is never skipped)', () => {
    const claim = encodeCommand({ kind: 'ClaimNamespace', namespace: NS });
    // version, 21, term 1, journal index 0, move id "m", then the claim's kind and body.
    const wrapped = Uint8Array.from([COMMAND_FORMAT_VERSION, 21, 1, 0, 1, 0x6d, ...claim.subarray(1)]);
    expect(() => decodeCommand(wrapped)).toThrow(/ClaimNamespace entry carries no move fence/);
    const zeroTerm = Uint8Array.from([
      COMMAND_FORMAT_VERSION,
      21,
      0,
      0,
      1,
      0x6d,
      ...encodeCommand({ kind: 'DropNamespace', namespace: NS }).subarray(1),
    ]);
    expect(() => decodeCommand(zeroTerm)).toThrow(/corrupt command entry: .*term/);
  });

  it('validateCommand refuses a malformed fence before it is proposed', () => {
    expect(validateCommand({ kind: 'FreezeNamespace', namespace: NS, fence: f(0) })).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(validateCommand({ kind: 'FreezeNamespace', namespace: NS, fence: { term: 1, journalIndex: 0, moveId: '' } })).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(
      validateCommand({ kind: 'FreezeNamespace', namespace: NS, fence: { term: 1, journalIndex: 0, moveId: 'x'.repeat(129) } }),
    ).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(validateCommand({ kind: 'FreezeNamespace', namespace: NS, fence: f(1) })).toBeUndefined();
  });
});

describe('formats before move fences', () => {
  it('a format-5 snapshot (no fences) restores with none; a format-3 export (no fence) imports with none', () => {
    const cell = claimed();
    cell.open('payments');
    cell.run({ kind: 'FreezeNamespace', namespace: NS });
    const v6 = cell.fsm.snapshot();
    // Format 5 is format 6 without the trailing move-fence count (0 here).
    expect(v6[v6.length - 1]).toBe(0);
    const v5 = Uint8Array.from([5, ...v6.subarray(1, v6.length - 1)]);
    const restored = LockStateMachine.restore(v5, { autoClaim: false });
    expect(restored.stateHash()).toBe(cell.fsm.stateHash());
    const out = cell.fsm.readExport(NS);
    if (!out.ok) throw new Error(out.code);
    // Format 3 is format 4 without the fence flag and the credential count after the three quota varuints (0, 0, 0 here).
    const flagAt = out.data.indexOf(0, 2 + NS.length + 2) + 3;
    expect([...out.data.subarray(flagAt - 3, flagAt + 2)]).toEqual([0, 0, 0, 0, 0]);
    const v3 = Uint8Array.from([3, ...out.data.subarray(1, flagAt), ...out.data.subarray(flagAt + 2)]);
    const target = new Cell({ autoClaim: false }, 100);
    expect(target.run({ kind: 'ImportNamespace', namespace: NS, data: v3, activate: false }).outcome).toMatchObject({
      ok: true,
      sessions: 1,
    });
    expect(target.fsm.moveFence(NS)).toBeUndefined();
  });
});

/**
 * Goal: the cell's member directory is replicated state. SetMemberAddress
 * records where a member listens (gRPC and Raft peer addresses), ForgetMember
 * drops it; both are deterministic commands with outcomes, survive the
 * command codec, and travel in snapshots (format 2), while format-1
 * snapshots, written before the directory existed, still restore.
 * Method: apply commands to a real LockStateMachine; encode, decode, snapshot
 * and restore it.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError } from '@fencer/base';
import { decodeCommand, encodeCommand, LockStateMachine, MEMBERS_MAX, SNAPSHOT_FORMAT_VERSION, type Command } from './index.js';

const options = { autoClaim: true };

function machine(): { fsm: LockStateMachine; apply: (c: Command) => unknown } {
  const fsm = new LockStateMachine(options);
  let index = 0;
  return { fsm, apply: (c) => fsm.apply(++index, c).outcome };
}

describe('member directory', () => {
  it('records, updates and forgets members, saying whether anything changed', () => {
    const { fsm, apply } = machine();
    expect(apply({ kind: 'SetMemberAddress', id: 'r9', address: '10.0.0.9:7001', peerAddress: '10.0.0.9:7301' })).toEqual({
      ok: true,
      changed: true,
    });
    expect(apply({ kind: 'SetMemberAddress', id: 'r9', address: '10.0.0.9:7001', peerAddress: '10.0.0.9:7301' })).toEqual({
      ok: true,
      changed: false,
    });
    expect(apply({ kind: 'SetMemberAddress', id: 'r9', address: '10.0.0.9:7001', peerAddress: '10.0.0.9:9000' })).toEqual({
      ok: true,
      changed: true,
    });
    expect([...fsm.members()]).toEqual([['r9', { address: '10.0.0.9:7001', peerAddress: '10.0.0.9:9000' }]]);
    expect(apply({ kind: 'ForgetMember', id: 'r9' })).toEqual({ ok: true, changed: true });
    expect(apply({ kind: 'ForgetMember', id: 'r9' })).toEqual({ ok: true, changed: false });
    expect(fsm.members().size).toBe(0);
  });

  it('refuses malformed ids and addresses with a reason, and changes nothing', () => {
    const { fsm, apply } = machine();
    expect(apply({ kind: 'SetMemberAddress', id: 'has space', address: 'h:1', peerAddress: 'h:2' })).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/member id/),
    });
    expect(apply({ kind: 'SetMemberAddress', id: 'r1', address: 'no-port', peerAddress: 'h:2' })).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/address must be host:port/),
    });
    expect(apply({ kind: 'SetMemberAddress', id: 'r1', address: 'h:1', peerAddress: 'h:70000' })).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/peer address/),
    });
    expect(apply({ kind: 'ForgetMember', id: '' })).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(fsm.members().size).toBe(0);
  });

  it(`holds at most ${MEMBERS_MAX} members`, () => {
    const { fsm, apply } = machine();
    for (let i = 0; i < MEMBERS_MAX; i++)
      expect(apply({ kind: 'SetMemberAddress', id: `r${i}`, address: `h:${1000 + i}`, peerAddress: `h:${2000 + i}` })).toMatchObject({
        ok: true,
      });
    expect(apply({ kind: 'SetMemberAddress', id: 'one-more', address: 'h:1', peerAddress: 'h:2' })).toMatchObject({
      ok: false,
      code: 'QUOTA_EXCEEDED',
    });
    // Updating a known member is still allowed when full.
    expect(apply({ kind: 'SetMemberAddress', id: 'r0', address: 'h:9', peerAddress: 'h:10' })).toEqual({ ok: true, changed: true });
    expect(fsm.members().size).toBe(MEMBERS_MAX);
  });

  it('both commands survive the command codec', () => {
    const commands: Command[] = [
      { kind: 'SetMemberAddress', id: 'cell-1-r9', address: '127.0.0.1:7009', peerAddress: '127.0.0.1:7309' },
      { kind: 'ForgetMember', id: 'cell-1-r9' },
    ];
    for (const c of commands) expect(decodeCommand(encodeCommand(c))).toEqual(c);
  });
});

describe('member directory in snapshots', () => {
  it('travels in snapshots, canonically (sorted by id), and restores', () => {
    const { fsm, apply } = machine();
    apply({ kind: 'SetMemberAddress', id: 'zeta', address: 'z:1', peerAddress: 'z:2' });
    apply({ kind: 'SetMemberAddress', id: 'alpha', address: 'a:1', peerAddress: 'a:2' });
    apply({ kind: 'OpenSession', sessionId: 'ns/s1' as never, clientId: 'c', namespace: 'ns' as never, ttlMs: 5000 });
    const bytes = fsm.snapshot();
    expect(bytes[0]).toBe(SNAPSHOT_FORMAT_VERSION);
    const restored = LockStateMachine.restore(bytes, options);
    expect([...restored.members()].sort()).toEqual([...fsm.members()].sort());
    expect(restored.snapshot()).toEqual(bytes);
    // Insertion order does not change the bytes.
    const other = machine();
    other.apply({ kind: 'SetMemberAddress', id: 'alpha', address: 'a:1', peerAddress: 'a:2' });
    other.apply({ kind: 'SetMemberAddress', id: 'zeta', address: 'z:1', peerAddress: 'z:2' });
    other.apply({ kind: 'OpenSession', sessionId: 'ns/s1' as never, clientId: 'c', namespace: 'ns' as never, ttlMs: 5000 });
    expect(other.fsm.snapshot()).toEqual(bytes);
  });

  it('restores a format-1 snapshot (written before the directory existed) with no members', () => {
    const { fsm, apply } = machine();
    apply({ kind: 'OpenSession', sessionId: 'ns/s1' as never, clientId: 'c', namespace: 'ns' as never, ttlMs: 5000 });
    const v6 = fsm.snapshot();
    // Format 1 is format 6 without the trailing member, staged-import and move-fence counts (0, 0 and 0 here).
    expect([...v6.subarray(v6.length - 3)]).toEqual([0, 0, 0]);
    const v1 = Uint8Array.from([1, ...v6.subarray(1, v6.length - 3)]);
    const restored = LockStateMachine.restore(v1, options);
    expect(restored.members().size).toBe(0);
    expect(restored.stateHash()).toBe(fsm.stateHash());
  });

  it('a snapshot whose members are out of order or malformed is an AssertionError', () => {
    const { fsm, apply } = machine();
    apply({ kind: 'SetMemberAddress', id: 'b', address: 'b:1', peerAddress: 'b:2' });
    apply({ kind: 'SetMemberAddress', id: 'c', address: 'c:1', peerAddress: 'c:2' });
    const bytes = fsm.snapshot();
    const text = String.fromCharCode(...bytes);
    const swapped = Uint8Array.from(
      text.replace('\u0001b\u0003b:1\u0003b:2\u0001c\u0003c:1\u0003c:2', '\u0001c\u0003c:1\u0003c:2\u0001b\u0003b:1\u0003b:2'),
      (ch) => ch.charCodeAt(0),
    );
    expect(swapped).not.toEqual(bytes);
    expect(() => LockStateMachine.restore(swapped, options)).toThrow(AssertionError);
    const badPort = Uint8Array.from(text.replace('b:1', 'b:x'), (ch) => ch.charCodeAt(0));
    expect(() => LockStateMachine.restore(badPort, options)).toThrow(AssertionError);
  });
});

/**
 * Goal: the binary encoding is exact and strict. Every command survives
 * encode/decode; varints and UTF-8 strings round-trip at their boundaries;
 * anything this version does not understand (unknown format version or
 * kind, truncation, trailing bytes, bad UTF-8) crashes the replica with an
 * AssertionError; stateless validation answers the contract's codes.
 * Method: fast-check round trips over generated commands and strings
 * (compared with Node's own UTF-8 encoder), and hand-made malformed bytes.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AssertionError, Namespace, RequestId, Revision, SessionId } from '@fencer/base';
import { COMMAND_FORMAT_VERSION, COMMAND_KIND_CODES, decodeCommand, encodeCommand, validateCommand, type Command } from './index.js';
import { utf8ByteLength } from '@fencer/contract';
import { ByteReader, ByteWriter, DecodeError } from './codec.js';

const text = fc.string({ unit: 'grapheme', maxLength: 40 });
const uint = fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }));
const mode = fc.constantFrom('EXCLUSIVE' as const, 'SHARED' as const);

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.record({
    kind: fc.constant('OpenSession' as const),
    sessionId: text.map(SessionId),
    clientId: text,
    namespace: text.map(Namespace),
    ttlMs: uint,
  }),
  fc.record({ kind: fc.constant('CloseSession' as const), sessionId: text.map(SessionId) }),
  fc.record({ kind: fc.constant('ExpireSession' as const), sessionId: text.map(SessionId) }),
  fc.record({
    kind: fc.constant('Acquire' as const),
    sessionId: text.map(SessionId),
    name: text,
    mode,
    requestId: text.map(RequestId),
    waitMs: uint,
    lockDelayMs: uint,
    tryLock: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('Release' as const), sessionId: text.map(SessionId), name: text, token: uint.map(Revision) }),
  fc.record({
    kind: fc.constant('CancelWait' as const),
    sessionId: text.map(SessionId),
    name: text,
    requestId: text.map(RequestId),
    reason: fc.constantFrom('timed-out' as const, 'cancelled' as const),
  }),
  fc.constant({ kind: 'Noop' as const }),
  fc.record({ kind: fc.constant('LiftLockDelay' as const), name: text, delayRevision: uint.map(Revision) }),
  ...(['ClaimNamespace', 'FreezeNamespace', 'UnfreezeNamespace', 'ExportNamespace', 'DropNamespace'] as const).map((kind) =>
    fc.record({ kind: fc.constant(kind), namespace: text.map(Namespace) }),
  ),
  fc.record({
    kind: fc.constant('ImportNamespace' as const),
    namespace: text.map(Namespace),
    data: fc.uint8Array({ maxLength: 300 }),
    activate: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('StageImportChunk' as const),
    namespace: text.map(Namespace),
    totalBytes: uint,
    offset: uint,
    data: fc.uint8Array({ maxLength: 300 }),
  }),
  fc.record({
    kind: fc.constant('ImportStagedNamespace' as const),
    namespace: text.map(Namespace),
    totalBytes: uint,
    activate: fc.boolean(),
  }),
);

describe('commands', () => {
  it('every command decodes to itself', () => {
    fc.assert(
      fc.property(commandArb, (command) => {
        const bytes = encodeCommand(command);
        expect(bytes[0]).toBe(COMMAND_FORMAT_VERSION);
        expect(bytes[1]).toBe(COMMAND_KIND_CODES[command.kind]);
        expect(decodeCommand(bytes)).toEqual(command);
      }),
      { numRuns: 2000 },
    );
  });

  it('an Acquire is compact: a typical one fits in under 64 bytes', () => {
    const bytes = encodeCommand({
      kind: 'Acquire',
      sessionId: SessionId('payments:7f3a9c01'),
      name: '/ls/payments/invoices/42',
      mode: 'EXCLUSIVE',
      requestId: RequestId('r-000123'),
      waitMs: 30_000,
      lockDelayMs: 0,
      tryLock: false,
    });
    expect(bytes.length).toBeLessThan(64);
  });

  it('an empty entry is a Noop', () => {
    expect(decodeCommand(new Uint8Array(0))).toEqual({ kind: 'Noop' });
  });

  it('an unknown format version or kind crashes', () => {
    expect(() => decodeCommand(new Uint8Array([2, 7]))).toThrow(/unknown command format version 2/);
    expect(() => decodeCommand(new Uint8Array([COMMAND_FORMAT_VERSION, 0]))).toThrow(/unknown command kind 0/);
    expect(() => decodeCommand(new Uint8Array([COMMAND_FORMAT_VERSION, 99]))).toThrow(AssertionError);
  });

  it('every truncation and any trailing byte crashes', () => {
    fc.assert(
      fc.property(commandArb, (command) => {
        const bytes = encodeCommand(command);
        for (let n = 1; n < bytes.length; n++) expect(() => decodeCommand(bytes.subarray(0, n))).toThrow(AssertionError);
        expect(() => decodeCommand(new Uint8Array([...bytes, 0]))).toThrow(AssertionError);
      }),
      { numRuns: 200 },
    );
  });

  it('unknown enum values inside a command crash', () => {
    const acquire = encodeCommand({
      kind: 'Acquire',
      sessionId: SessionId('p:s'),
      name: 'n',
      mode: 'SHARED',
      requestId: RequestId('r'),
      waitMs: 0,
      lockDelayMs: 0,
      tryLock: true,
    });
    // version, kind, "p:s" (len 3), "n" (len 1), then the mode byte and the flags byte.
    const modeAt = 2 + 4 + 2;
    const badMode = acquire.slice();
    badMode[modeAt] = 3;
    expect(() => decodeCommand(badMode)).toThrow(/unknown lock mode/);
    const badFlags = acquire.slice();
    badFlags[modeAt + 1] = 2;
    expect(() => decodeCommand(badFlags)).toThrow(/unknown Acquire flags/);
  });
});

describe('byte codec', () => {
  it('varuints round-trip up to 2^53 - 1, with the expected lengths', () => {
    const sizes: [number, number][] = [
      [0, 1],
      [127, 1],
      [128, 2],
      [16_383, 2],
      [16_384, 3],
      [2 ** 31 - 1, 5],
      [2 ** 31, 5],
      [2 ** 32, 5],
      [Number.MAX_SAFE_INTEGER, 8],
    ];
    for (const [v, len] of sizes) {
      const bytes = new ByteWriter(16).varuint(v).finish();
      expect(bytes.length).toBe(len);
      const r = new ByteReader(bytes);
      expect(r.varuint()).toBe(v);
      r.end();
    }
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        (v) => new ByteReader(new ByteWriter(16).varuint(v).finish()).varuint() === v,
      ),
    );
  });

  it('rejects overlong and oversized varuints, and refuses to write unsafe numbers', () => {
    expect(() => new ByteReader(new Uint8Array([0x80, 0x00])).varuint()).toThrow(DecodeError);
    expect(() => new ByteReader(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])).varuint()).toThrow(DecodeError);
    expect(() => new ByteReader(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])).varuint()).toThrow(/exceeds 2\^53/);
    expect(() => new ByteWriter(16).varuint(2 ** 53)).toThrow(AssertionError);
    expect(() => new ByteWriter(16).varuint(-1)).toThrow(AssertionError);
    expect(() => new ByteWriter(16).varuint(1.5)).toThrow(AssertionError);
  });

  it('writes the same UTF-8 as Node’s encoder and reads it back', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (s) => {
        const bytes = new ByteWriter(16).string(s).finish();
        const expected = Buffer.from(s, 'utf8');
        expect(utf8ByteLength(s)).toBe(expected.length);
        const r = new ByteReader(bytes);
        expect(r.varuint()).toBe(expected.length);
        expect(Buffer.from(bytes.subarray(bytes.length - expected.length)).equals(expected)).toBe(true);
        const back = new ByteReader(bytes);
        expect(back.string()).toBe(s);
        back.end();
      }),
      { numRuns: 1000 },
    );
  });

  it('refuses lone surrogates on the write path and reports them in utf8ByteLength', () => {
    expect(utf8ByteLength('a\ud800b')).toBe(-1);
    expect(utf8ByteLength('\udc00')).toBe(-1);
    expect(utf8ByteLength('😀')).toBe(4);
    expect(() => new ByteWriter(16).string('x\ud800')).toThrow(AssertionError);
  });

  it('rejects malformed UTF-8 on the read path', () => {
    const read = (...b: number[]) => new ByteReader(new Uint8Array([b.length, ...b])).string();
    expect(read(0xc3, 0xa9)).toBe('é');
    for (const bad of [[0xc0, 0x80], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0x80], [0xc3], [0xff]]) {
      expect(() => read(...bad), JSON.stringify(bad)).toThrow(DecodeError);
    }
  });

  it('long ASCII strings take the bulk path and still round-trip', () => {
    const s = 'x'.repeat(5000);
    expect(new ByteReader(new ByteWriter(16).string(s).finish()).string()).toBe(s);
  });
});

describe('validateCommand (stateless checks before proposing)', () => {
  const acquire = {
    kind: 'Acquire',
    sessionId: SessionId('payments:s1'),
    name: '/ls/payments/x',
    mode: 'EXCLUSIVE',
    requestId: RequestId('r1'),
    waitMs: 1000,
    lockDelayMs: 0,
    tryLock: false,
  } as const;

  it('accepts good commands', () => {
    expect(validateCommand(acquire)).toBeUndefined();
    expect(
      validateCommand({
        kind: 'OpenSession',
        sessionId: SessionId('payments:s1'),
        clientId: 'w',
        namespace: Namespace('payments'),
        ttlMs: 10_000,
      }),
    ).toBeUndefined();
    expect(validateCommand({ kind: 'Noop' })).toBeUndefined();
  });

  it.each([
    [{ ...acquire, name: '/ls/billing/x' }, 'WRONG_NAMESPACE'],
    [{ ...acquire, name: '/ls/payments' }, 'INVALID_NAME'],
    [{ ...acquire, requestId: RequestId('') }, 'MISSING_REQUEST_ID'],
    [{ ...acquire, requestId: RequestId('r'.repeat(129)) }, 'INVALID_ARGUMENT'],
    [{ ...acquire, requestId: RequestId('\ud800') }, 'INVALID_ARGUMENT'],
    [{ ...acquire, mode: 'BOTH' as 'SHARED' }, 'INVALID_MODE'],
    [{ ...acquire, lockDelayMs: 60_001 }, 'INVALID_ARGUMENT'],
    [{ ...acquire, waitMs: -1 }, 'INVALID_ARGUMENT'],
    [{ ...acquire, sessionId: SessionId('payments') }, 'INVALID_ARGUMENT'],
    [{ ...acquire, sessionId: SessionId('payments:a b') }, 'INVALID_ARGUMENT'],
    [{ kind: 'OpenSession', sessionId: SessionId('payments:s'), clientId: 'w', namespace: Namespace('payments'), ttlMs: 0 }, 'INVALID_TTL'],
    [
      { kind: 'OpenSession', sessionId: SessionId('billing:s'), clientId: 'w', namespace: Namespace('payments'), ttlMs: 1000 },
      'INVALID_ARGUMENT',
    ],
    [
      { kind: 'OpenSession', sessionId: SessionId('payments:s'), clientId: 'w'.repeat(257), namespace: Namespace('payments'), ttlMs: 1000 },
      'INVALID_ARGUMENT',
    ],
    [{ kind: 'ClaimNamespace', namespace: Namespace('..') }, 'INVALID_ARGUMENT'],
    [{ kind: 'LiftLockDelay', name: 'nope', delayRevision: Revision(1) }, 'INVALID_NAME'],
  ] as [Command, string][])('answers %j with %s', (command, code) => {
    expect(validateCommand(command)).toMatchObject({ ok: false, code });
  });
});

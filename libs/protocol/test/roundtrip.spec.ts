/**
 * Goal: every message of every proto survives encode → decode with every
 * field set to a non-default value, through the generated code, and the bytes
 * mean the same to an independent protobuf implementation (protobufjs).
 * Method: walk each .proto's descriptor (parsed by protobufjs), build a value
 * with every field non-default, round-trip it through ts-proto's codec, then
 * decode the same bytes with protobufjs and compare.
 */
import { describe, expect, it } from 'vitest';
import protobuf from 'protobufjs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminpb, internalpb, lockservice, raftpb } from '../src/index.js';

const protoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../proto');

interface Codec {
  encode(message: unknown): { finish(): Uint8Array };
  decode(input: Uint8Array): unknown;
}

const files: [string, Record<string, unknown>][] = [
  ['lockservice/v1/lockservice.proto', lockservice],
  ['fencer/raft/v1/raft.proto', raftpb],
  ['fencer/admin/v1/admin.proto', adminpb],
  ['fencer/internal/v1/heartbeat.proto', internalpb],
];

function scalarValue(type: string, seed: number, field: protobuf.Field): unknown {
  switch (type) {
    case 'string':
      return `v${seed}-${field.name}-é`;
    case 'uint64':
    case 'int64':
    case 'fixed64':
      return 2 ** 40 + seed; // beyond 32 bits, inside the safe integer range
    case 'uint32':
    case 'int32':
    case 'fixed32':
      return 7 + seed;
    case 'bool':
      return true;
    case 'bytes':
      return new Uint8Array([1, 2, 3, seed & 0xff]);
    case 'double':
    case 'float':
      return 1.5;
    default:
      throw new Error(`no sample for scalar type ${type}`);
  }
}

/** A value of `type` with every field non-default, in ts-proto's shape. */
function sample(type: protobuf.Type, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  type.fieldsArray.forEach((f, i) => {
    f.resolve();
    const one = (k: number): unknown => {
      if (f.resolvedType instanceof protobuf.Enum) {
        const values = Object.values(f.resolvedType.values).filter((v) => v !== 0);
        return values[(k + i) % values.length];
      }
      if (f.resolvedType instanceof protobuf.Type) return depth < 3 ? sample(f.resolvedType, depth + 1) : {};
      return scalarValue(f.type, i + k, f);
    };
    out[f.name] = f.repeated ? [one(0), one(1)] : one(0);
  });
  return out;
}

/** protobufjs's decoded view normalised to ts-proto's shape (numbers, Uint8Array, enums as numbers). */
function normalise(type: protobuf.Type, value: protobuf.Message): unknown {
  return type.toObject(value, { longs: Number, enums: Number, bytes: Array, defaults: true, arrays: true });
}

function toComparable(v: unknown): unknown {
  if (v instanceof Uint8Array || Buffer.isBuffer(v)) return Array.from(v as Uint8Array);
  if (Array.isArray(v)) return v.map(toComparable);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toComparable(x)]));
  return v;
}

describe('generated messages round-trip with every field set', () => {
  for (const [file, mod] of files) {
    const root = protobuf.loadSync(path.join(protoRoot, file));
    root.resolveAll();
    const types: protobuf.Type[] = [];
    const walk = (ns: protobuf.NamespaceBase): void => {
      for (const nested of ns.nestedArray) {
        if (nested instanceof protobuf.Type) types.push(nested);
        if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) walk(nested as protobuf.NamespaceBase);
      }
    };
    walk(root);

    it(`${file}: ${types.length} messages`, () => {
      expect(types.length).toBeGreaterThan(2);
      for (const type of types) {
        const codec = mod[type.name] as Codec | undefined;
        expect(codec, `generated codec for ${type.fullName}`).toBeDefined();
        const value = sample(type);
        const bytes = codec!.encode(value).finish();
        if (type.fieldsArray.length > 0) expect(bytes.length, type.fullName).toBeGreaterThan(0);
        expect(toComparable(codec!.decode(bytes)), type.fullName).toEqual(toComparable(value));
        const independent = normalise(type, type.decode(bytes));
        expect(toComparable(independent), `${type.fullName} as protobufjs reads it`).toEqual(toComparable(value));
      }
    });
  }
});

describe('uint64 beyond 2^53', () => {
  it('saturates to Number.MAX_SAFE_INTEGER instead of failing to decode (bad input must not be INTERNAL)', () => {
    const root = protobuf.loadSync(path.join(protoRoot, 'lockservice/v1/lockservice.proto'));
    const type = root.lookupType('lockservice.v1.OpenSessionRequest');
    const bytes = type.encode(type.fromObject({ clientId: 'c', ttlMs: '9223372036854775808', namespace: 'ns' })).finish();
    const decoded = lockservice.OpenSessionRequest.decode(bytes);
    expect(decoded.ttlMs).toBe(Number.MAX_SAFE_INTEGER);
    expect(decoded.namespace).toBe('ns');
  });
});

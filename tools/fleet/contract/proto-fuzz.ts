/**
 * Test support (`@fencer/fleet/fuzz`): gRPC requests generated from the protos with fast-check, sent
 * as raw bytes (an identity serializer), for fuzz tests of every server that
 * speaks the contract or the admin API.
 *
 * Each request is a message of the method's request type, built field by
 * field from the proto's descriptor (protobufjs reflection): strings from a
 * pool of plausible values plus arbitrary and huge ones, numbers at their
 * boundaries (0, 1, 2^31, 2^32, 2^53, 2^64 - 1), unknown enum values,
 * nested messages; then, sometimes, mangled on the wire: unknown fields of
 * every wire type appended, a field's wire type changed, the bytes cut short
 * or replaced by random ones. Streaming calls are cancelled after their first
 * answer or a short while (the cancelled streams).
 */
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import path from 'node:path';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { Client, Metadata, credentials, status, type ServiceError, type StatusObject } from '@grpc/grpc-js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const identity = (b: Buffer): Buffer => b;

export type CallKind = 'unary' | 'server-stream' | 'bidi';

export interface FuzzMethod {
  /** `/package.Service/Method`. */
  readonly path: string;
  readonly name: string;
  readonly kind: CallKind;
  readonly requestType: protobuf.Type;
}

/** The methods of `service` (e.g. 'lockservice.v1.LockService') in `protoFile` (relative to the repository), minus `skip`. */
export function methodsOf(protoFile: string, service: string, skip: readonly string[] = []): FuzzMethod[] {
  const proto = protobuf.loadSync(path.join(root, protoFile));
  const svc = proto.lookupService(service);
  return svc.methodsArray
    .filter((m) => !skip.includes(m.name))
    .map((m) => {
      m.resolve();
      const kind: CallKind = m.requestStream ? 'bidi' : m.responseStream ? 'server-stream' : 'unary';
      return { path: `/${service}/${m.name}`, name: m.name, kind, requestType: m.resolvedRequestType as protobuf.Type };
    });
}

const BOUNDARY_NUMBERS = [0, 1, 2, 255, 256, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1];
/** uint64 values past 2^53, as protobufjs takes them (decimal strings). */
const BIG_UINT64 = ['9007199254740993', '9223372036854775807', '9223372036854775808', '18446744073709551615'];

/** A string field: mostly plausible values of this fleet (`pool`), sometimes anything, now and then huge. */
function stringArb(pool: readonly string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...pool) },
    { weight: 3, arbitrary: fc.string({ maxLength: 40, unit: 'binary' }) },
    { weight: 1, arbitrary: fc.constantFrom(...pool).map((p) => p + '/x'.repeat(300)) },
    { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 100_000 }).map((n) => 'x'.repeat(n)) },
  );
}

function numberArb(field: protobuf.Field): fc.Arbitrary<number | string> {
  const signed = ['int32', 'int64', 'sint32', 'sint64', 'sfixed32', 'sfixed64'].includes(field.type);
  const wide = field.type.endsWith('64');
  const base = fc.oneof(
    fc.constantFrom(...BOUNDARY_NUMBERS),
    fc.nat(),
    ...(wide ? [fc.constantFrom(...BIG_UINT64)] : []),
    ...(signed ? [fc.constantFrom(-1, -(2 ** 31), -(2 ** 53) + 1)] : []),
  );
  if (field.type === 'double' || field.type === 'float') return fc.oneof(fc.double(), fc.constantFrom(0, -0, 1e308));
  // 32-bit fields take 32-bit values only in protobufjs; the wider ones are for the 64-bit fields.
  return wide ? base : base.map((v) => (typeof v === 'number' ? v | 0 : 0));
}

function fieldArb(field: protobuf.Field, pool: readonly string[], depth: number): fc.Arbitrary<unknown> {
  field.resolve();
  let one: fc.Arbitrary<unknown>;
  if (field.resolvedType instanceof protobuf.Type) {
    one = depth > 2 ? fc.constant({}) : messageArb(field.resolvedType, pool, depth + 1);
  } else if (field.resolvedType instanceof protobuf.Enum) {
    one = fc.oneof(fc.constantFrom(...Object.values(field.resolvedType.values)), fc.integer({ min: -5, max: 1_000 }));
  } else if (field.type === 'string') {
    one = stringArb(pool);
  } else if (field.type === 'bytes') {
    one = fc.uint8Array({ maxLength: 256 });
  } else if (field.type === 'bool') {
    one = fc.boolean();
  } else {
    one = numberArb(field);
  }
  return field.repeated ? fc.array(one, { maxLength: 5 }) : one;
}

function messageArb(type: protobuf.Type, pool: readonly string[], depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const shape: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of type.fieldsArray) shape[f.name] = fieldArb(f, pool, depth);
  return fc.record(shape, { requiredKeys: [] });
}

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** One unknown field (number 1000+) of each wire type the generator picks. */
const unknownFieldArb = fc
  .record({
    number: fc.integer({ min: 1_000, max: 536_870_911 }),
    wire: fc.constantFrom(0, 1, 2, 5),
    body: fc.uint8Array({ maxLength: 16 }),
  })
  .map(({ number, wire, body }) => {
    const tag = varint(number * 8 + wire);
    if (wire === 0) return [...tag, ...varint(body.length * 1_000 + 7)];
    if (wire === 1) return [...tag, 1, 2, 3, 4, 5, 6, 7, 8];
    if (wire === 5) return [...tag, 1, 2, 3, 4];
    return [...tag, ...varint(body.length), ...body];
  });

export type Mangling = 'none' | 'unknown-fields' | 'wrong-wire-type' | 'truncated' | 'random';

/** A request of `method`'s type as bytes, mangled or not, with how it was mangled. */
export function requestArb(method: FuzzMethod, pool: readonly string[]): fc.Arbitrary<{ bytes: Buffer; mangling: Mangling }> {
  const type = method.requestType;
  const encoded = messageArb(type, pool).map((obj) => Buffer.from(type.encode(type.fromObject(obj)).finish()));
  return fc
    .tuple(
      encoded,
      fc.constantFrom<Mangling>('none', 'none', 'unknown-fields', 'wrong-wire-type', 'truncated', 'random'),
      fc.array(unknownFieldArb, { minLength: 1, maxLength: 4 }),
      fc.uint8Array({ maxLength: 64 }),
      fc.nat(),
    )
    .map(([bytes, mangling, unknown, random, at]) => {
      switch (mangling) {
        case 'unknown-fields':
          return { bytes: Buffer.concat([bytes, Buffer.from(unknown.flat())]), mangling };
        case 'wrong-wire-type': {
          // The first byte of a non-empty message is a field's tag: give it another wire type.
          if (bytes.length === 0) return { bytes: Buffer.from([0x0a, 0x05, 1, 2]), mangling };
          const copy = Buffer.from(bytes);
          copy[0] = (copy[0]! & ~7) | ((copy[0]! & 7) === 2 ? 0 : 2);
          return { bytes: copy, mangling };
        }
        case 'truncated':
          return { bytes: bytes.subarray(0, bytes.length === 0 ? 0 : at % bytes.length), mangling };
        case 'random':
          return { bytes: Buffer.from(random), mangling };
        default:
          return { bytes, mangling };
      }
    });
}

/** The status a call ended with (OK included), or 'no-answer' when the server gave none within `timeoutMs`. */
export function sendRawRequest(client: Client, method: FuzzMethod, bytes: Buffer, timeoutMs: number): Promise<status | 'no-answer'> {
  const options = { deadline: Date.now() + timeoutMs };
  return new Promise((resolve) => {
    let settled = false;
    const end = (code: status | 'no-answer'): void => {
      if (settled) return;
      settled = true;
      resolve(code);
    };
    if (method.kind === 'unary') {
      client.makeUnaryRequest(method.path, identity, identity, bytes, new Metadata(), options, (err: ServiceError | null) =>
        end(err ? err.code : status.OK),
      );
      return;
    }
    const call =
      method.kind === 'server-stream'
        ? client.makeServerStreamRequest(method.path, identity, identity, bytes, new Metadata(), options)
        : client.makeBidiStreamRequest(method.path, identity, identity, new Metadata(), options);
    // A stream is cancelled by the client after its first answer or 200 ms: the cancelled streams of the brief.
    const cancel = setTimeout(() => call.cancel(), 200);
    call.on('data', () => call.cancel());
    call.on('error', (e: ServiceError) => {
      clearTimeout(cancel);
      end(e.code === status.CANCELLED ? status.OK : e.code);
    });
    call.on('status', (s: StatusObject) => {
      clearTimeout(cancel);
      end(s.code === status.CANCELLED ? status.OK : s.code);
    });
    if (method.kind === 'bidi') (call as ReturnType<Client['makeBidiStreamRequest']>).write(bytes);
  });
}

/** A raw client on `address` (no retries, no retry buffer). */
export function rawClient(address: string): Client {
  return new Client(address, credentials.createInsecure(), { 'grpc.per_rpc_retry_buffer_size': 0, 'grpc.enable_retries': 0 });
}

/** Resident set size of process `pid` in bytes, from /proc (Linux). */
export async function rssOf(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(text)?.[1]);
  return kb * 1024;
}

/** What a fuzz run saw: requests sent, statuses by name, and the answers that break the rules (INTERNAL, UNKNOWN, none). */
export interface Tally {
  sent: number;
  readonly byStatus: Map<string, number>;
  readonly bad: { method: string; mangling: Mangling; code: string; bytes: string }[];
}

export function tally(): Tally {
  return { sent: 0, byStatus: new Map(), bad: [] };
}

export function describeTally(t: Tally): string {
  return `fuzz: ${t.sent} requests; statuses ${JSON.stringify(Object.fromEntries(t.byStatus))}`;
}

export interface FuzzRun {
  readonly client: Client;
  readonly methods: readonly FuzzMethod[];
  readonly count: number;
  /** fast-check seed: the same seed sends the same requests. */
  readonly seed: number;
  /** Plausible strings of the system under test (namespaces, names, session ids). */
  readonly pool: readonly string[];
  readonly timeoutMs: number;
  /** Calls in flight at once (default 64). */
  readonly concurrency?: number;
}

/** Requests sampled per batch: bounds what one run holds in memory. */
const FUZZ_BATCH = 500;

/** Sends `count` generated requests, `concurrency` at a time; records every status in `t`. */
export async function fuzz(run: FuzzRun, t: Tally): Promise<void> {
  const arb = fc.constantFrom(...run.methods).chain((m) => requestArb(m, run.pool).map((r) => ({ method: m, ...r })));
  for (let done = 0; done < run.count; done += FUZZ_BATCH) {
    const batch = fc.sample(arb, { numRuns: Math.min(FUZZ_BATCH, run.count - done), seed: run.seed + done });
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < batch.length) {
        const { method, bytes, mangling } = batch[next++]!;
        const code = await sendRawRequest(run.client, method, bytes, run.timeoutMs);
        t.sent++;
        const name = code === 'no-answer' ? code : status[code];
        t.byStatus.set(name, (t.byStatus.get(name) ?? 0) + 1);
        if (code === status.INTERNAL || code === status.UNKNOWN || code === 'no-answer')
          t.bad.push({ method: method.name, mangling, code: name, bytes: bytes.subarray(0, 64).toString('hex') });
      }
    };
    await Promise.all(Array.from({ length: run.concurrency ?? 64 }, worker));
  }
}

/** The HTTP/2 client connection preface. */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** One HTTP/2 frame: 24-bit length (which may lie), type, flags, stream id, payload. */
const h2FrameArb = fc
  .record({
    type: fc.oneof(fc.integer({ min: 0, max: 9 }), fc.integer({ min: 10, max: 255 })),
    flags: fc.integer({ min: 0, max: 255 }),
    stream: fc.oneof(fc.constantFrom(0, 1, 3, 2 ** 31 - 1), fc.nat()),
    payload: fc.uint8Array({ maxLength: 96 }),
    lie: fc.oneof(fc.constant(0), fc.integer({ min: -50, max: 2 ** 24 - 1 })),
  })
  .map(({ type, flags, stream, payload, lie }) => {
    const length = Math.max(0, Math.min(2 ** 24 - 1, lie === 0 ? payload.length : lie));
    const head = Buffer.from([length >> 16, (length >> 8) & 0xff, length & 0xff, type, flags, 0, 0, 0, 0]);
    head.writeUInt32BE(stream >>> 0, 5);
    return Buffer.concat([head, Buffer.from(payload)]);
  });

/** A gRPC message frame with a lying prefix: compressed flag, a length past the end, a body that is no message. */
const grpcDataArb = fc
  .record({ compressed: fc.integer({ min: 0, max: 255 }), length: fc.nat(), body: fc.uint8Array({ maxLength: 64 }) })
  .map(({ compressed, length, body }) => {
    const prefix = Buffer.alloc(5);
    prefix[0] = compressed;
    prefix.writeUInt32BE(length >>> 0, 1);
    const payload = Buffer.concat([prefix, Buffer.from(body)]);
    const head = Buffer.from([payload.length >> 16, (payload.length >> 8) & 0xff, payload.length & 0xff, 0, 1, 0, 0, 0, 1]);
    return Buffer.concat([head, payload]);
  });

/**
 * Raw bytes for a gRPC port: random bytes, a preface followed by frames
 * (lying lengths, unknown types, odd streams), or a preface, an empty
 * SETTINGS and a DATA frame on stream 1 carrying a malformed gRPC message.
 */
export const rawHttp2Arb: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 128 }).map((b) => Buffer.from(b)),
  fc.array(h2FrameArb, { minLength: 1, maxLength: 6 }).map((frames) => Buffer.concat([H2_PREFACE, ...frames])),
  fc
    .tuple(fc.boolean(), grpcDataArb)
    .map(([settings, data]) => Buffer.concat([H2_PREFACE, settings ? Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]) : Buffer.alloc(0), data])),
);

/** How long a raw connection may stay open after the fuzzer's half-close before the fuzzer drops it (an idle but valid HTTP/2 session may wait). */
const RAW_HOLD_MS = 2_000;

/** Connects, writes `bytes`, half-closes; resolves 'closed' when the server closed (or reset) it, 'held' when the fuzzer had to drop it. */
function sendRawOnce(port: number, bytes: Buffer): Promise<'closed' | 'held'> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let held = false;
    const timer = setTimeout(() => {
      held = true;
      socket.destroy();
    }, RAW_HOLD_MS);
    socket.on('connect', () => socket.end(bytes));
    socket.on('data', () => {});
    // The server may reset before it has read everything (a refused frame): a reset is an answer too.
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(held ? 'held' : 'closed');
    });
  });
}

/**
 * Sends `count` raw payloads (sampled from `seed`) to 127.0.0.1:`port`,
 * `concurrency` connections at a time. Returns how many the server closed
 * and how many it still held open RAW_HOLD_MS after the half-close.
 */
export async function fuzzRaw(port: number, count: number, seed: number, concurrency = 32): Promise<{ closed: number; held: number }> {
  const seen = { closed: 0, held: 0 };
  for (let done = 0; done < count; done += FUZZ_BATCH) {
    const batch = fc.sample(rawHttp2Arb, { numRuns: Math.min(FUZZ_BATCH, count - done), seed: seed + done });
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < batch.length) seen[await sendRawOnce(port, batch[next++]!)]++;
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }
  return seen;
}

/**
 * Test support for forged-peer.spec.ts: where a running replica listens
 * (from its command line, checked against the kernel's own list), how a
 * forgery is sent to each kind of port, and the forgeries themselves, each
 * with the refusal reason its receiver must count.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import http2 from 'node:http2';
import { type ServiceError, credentials, status } from '@grpc/grpc-js';
import type { SeededRandom } from '@fencer/base';
import { raftpb } from '@fencer/protocol';
import { encodePeerFrame } from '@fencer/peer-transport';
import type { Cell } from './cell.js';

const { MessageType: T } = raftpb;
/** A node id no configuration names. */
const INTRUDER = 'intruder-9';
const TERM_NEAR_2_53 = 2 ** 53 - 1;
/** A field with wire type 7 (invalid) right away: no protobuf decoder takes it. */
export const NOT_A_BATCH = Buffer.from([0x0f, 1, 2, 3, 4, 5, 6, 7]);
export const SEND_PATH = '/fencer.raft.v1.RaftTransport/Send';

export type PortKind = 'lock' | 'admin' | 'metrics' | 'peer';
export interface Target {
  readonly id: string;
  readonly pid: number;
  readonly cellId: string;
  readonly ports: Readonly<Record<PortKind, number>>;
}

/** The value after `flag` in a replica's command line. */
function flag(argv: readonly string[], name: string): string {
  const at = argv.indexOf(name);
  if (at < 0 || at + 1 >= argv.length) throw new Error(`the replica's command line has no ${name}`);
  return argv[at + 1]!;
}

const portOf = (address: string): number => Number(address.slice(address.lastIndexOf(':') + 1));

/** TCP ports a process listens on, from the kernel: its socket inodes matched against /proc/net/tcp{,6} LISTEN rows. */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let link = '';
    try {
      link = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed between readdir and readlink
    }
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(m[1]!);
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue; // no IPv6 on this machine
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const LISTEN = '0A';
      if (f[3] === LISTEN && inodes.has(f[9]!)) ports.add(parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort((x, y) => x - y);
}

export function targets(cell: Cell): Target[] {
  return cell.replicas.map((r) => {
    const pid = cell.children.get(r.id)!.pid!;
    return {
      id: r.id,
      pid,
      cellId: flag(r.argv, '--cell-id'),
      ports: {
        lock: portOf(flag(r.argv, '--listen')),
        admin: portOf(flag(r.argv, '--admin-listen')),
        metrics: portOf(flag(r.argv, '--metrics-listen')),
        peer: portOf(flag(r.argv, '--peer-listen')),
      },
    };
  });
}

// ------------------------------------------------------------ sending

/**
 * An HTTP/2 request with a gRPC-framed body of `body` bytes, whose length prefix says `declaredBytes` (and whose
 * compressed flag is set, under `grpc-encoding: gzip`, when `gzipFlagged`); resolves with its grpc-status (or the HTTP/2
 * error).
 */
export function http2Call(port: number, path: string, body: Uint8Array, declaredBytes = body.length, gzipFlagged = false): Promise<string> {
  return new Promise((resolve) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', (e) => resolve(`session error: ${e.message}`));
    const req = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...(gzipFlagged ? { 'grpc-encoding': 'gzip' } : {}),
    });
    let grpcStatus: string | undefined;
    req.on('response', (h) => (grpcStatus = h['grpc-status'] as string | undefined));
    req.on('trailers', (t) => (grpcStatus = (t['grpc-status'] as string | undefined) ?? grpcStatus));
    req.on('data', () => {});
    req.on('error', (e) => {
      session.close();
      resolve(`stream error: ${e.message}`);
    });
    req.on('close', () => {
      session.close();
      resolve(grpcStatus ?? 'no grpc-status');
    });
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt8(gzipFlagged ? 1 : 0, 0);
    frame.writeUInt32BE(declaredBytes, 1);
    frame.set(body, 5);
    req.end(frame);
  });
}

/** The Raft peer service called on a gRPC port: its status code. */
export function raftServiceCall(port: number, cellId: string, to: string): Promise<number> {
  const client = new raftpb.RaftTransportClient(`127.0.0.1:${port}`, credentials.createInsecure());
  return new Promise<number>((resolve) => {
    const stream = client.send();
    stream.on('error', (e: ServiceError) => resolve(e.code));
    stream.on('data', () => {});
    stream.on('end', () => resolve(status.OK));
    stream.write({ senderAddress: '', cellId, messages: [wire({ type: T.MESSAGE_TYPE_HEARTBEAT, from: INTRUDER, to, term: 1_000 })] });
    stream.end();
  }).finally(() => client.close());
}

export interface CallEnd {
  /** The call's status code, or undefined when none came within the limit. */
  readonly code: status | undefined;
  readonly details: string;
}

/**
 * One RaftTransport.Send call on a gRPC peer port carrying `batch`, half-closed at once: how it ended. A call the
 * server leaves open is cancelled after `limitMs` and reported without a code.
 */
export function peerStreamCall(port: number, batch: raftpb.RaftBatch, limitMs = 10_000): Promise<CallEnd> {
  const client = new raftpb.RaftTransportClient(`127.0.0.1:${port}`, credentials.createInsecure());
  return new Promise<CallEnd>((resolve) => {
    const stream = client.send();
    const timer = setTimeout(() => {
      resolve({ code: undefined, details: `no status ${limitMs} ms after the test's half-close` });
      stream.cancel();
    }, limitMs);
    stream.on('data', () => {});
    stream.on('error', () => {}); // the status below says it all
    stream.on('status', (s: { code: status; details: string }) => {
      clearTimeout(timer);
      resolve({ code: s.code, details: s.details });
    });
    stream.write(batch);
    stream.end();
  }).finally(() => client.close());
}

// ------------------------------------------------------------ payloads

function wire(m: Partial<raftpb.RaftMessage> & Pick<raftpb.RaftMessage, 'type' | 'from' | 'to' | 'term'>): raftpb.RaftMessage {
  return { entries: [], ...m };
}

export function randomBytes(random: SeededRandom, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = random.int(256);
  return b;
}

/** A raw 4-byte big-endian length prefix followed by `body`. */
function prefixed(length: number, body: Uint8Array): Buffer {
  const b = Buffer.alloc(4 + body.length);
  b.writeUInt32BE(length, 0);
  b.set(body, 4);
  return b;
}

export interface Forgery {
  readonly what: string;
  /** The forged batch; absent for a forgery of the TCP framing itself. */
  readonly batch?: raftpb.RaftBatch;
  /** The forgery as bytes on a TCP peer connection. */
  readonly bytes: Buffer;
  /** The refusal reason the receiving replica's peer port must count for it, at least `count` times. */
  readonly reason: string;
  readonly count: number;
}

/**
 * Frames for replica `self` of cell `cellId` at the cell's term `term`
 * (`member` and `third` are the other two members): each well-formed as a
 * frame, each a message the replica must not act on.
 */
export function forgedFrames(self: string, member: string, third: string, cellId: string, term: number, random: SeededRandom): Forgery[] {
  const higher = term + 1;
  const kinds = [T.MESSAGE_TYPE_HEARTBEAT, T.MESSAGE_TYPE_APPEND_ENTRIES, T.MESSAGE_TYPE_REQUEST_VOTE, T.MESSAGE_TYPE_TIMEOUT_NOW];
  const batch = (messages: raftpb.RaftMessage[], cell = cellId): Pick<Forgery, 'batch' | 'bytes'> => {
    const b: raftpb.RaftBatch = { senderAddress: '', cellId: cell, messages };
    return { batch: b, bytes: encodePeerFrame(b) };
  };
  const each = (f: (type: raftpb.MessageType) => raftpb.RaftMessage): raftpb.RaftMessage[] => kinds.map(f);
  const garbageEntry = { term: higher, index: 1, type: 9, data: new Uint8Array([1, 2, 3]) };
  return [
    {
      what: 'wrong to (another member), higher term',
      ...batch(each((type) => wire({ type, from: member, to: third, term: higher }))),
      reason: 'wrong-to',
      count: kinds.length,
    },
    {
      what: 'wrong to (nobody), higher term',
      ...batch(each((type) => wire({ type, from: member, to: 'nobody', term: higher }))),
      reason: 'wrong-to',
      count: kinds.length,
    },
    {
      what: 'from equal to the receiver, higher term',
      ...batch(each((type) => wire({ type, from: self, to: self, term: higher }))),
      reason: 'from-self',
      count: kinds.length,
    },
    {
      what: 'a non-member from, higher term by 1',
      ...batch(each((type) => wire({ type, from: INTRUDER, to: self, term: higher, index: 0, logTerm: 0, commit: 0 }))),
      reason: 'not-member',
      count: 1,
    },
    {
      what: 'a non-member from, a term near 2^53',
      ...batch(each((type) => wire({ type, from: INTRUDER, to: self, term: TERM_NEAR_2_53 }))),
      reason: 'not-member',
      count: 1,
    },
    {
      what: 'a member from, a term near 2^53',
      ...batch(each((type) => wire({ type, from: member, to: self, term: TERM_NEAR_2_53 }))),
      reason: 'bad-term',
      count: kinds.length,
    },
    {
      what: "a member from, higher term, an entry of a type the log doesn't know",
      ...batch([
        wire({ type: T.MESSAGE_TYPE_APPEND_ENTRIES, from: member, to: self, term: higher, index: 0, logTerm: 0, entries: [garbageEntry] }),
      ]),
      reason: 'bad-entries',
      count: 1,
    },
    {
      what: 'a member from, higher term, a message type this node does not know',
      ...batch([wire({ type: 99 as raftpb.MessageType, from: member, to: self, term: higher })]),
      reason: 'unknown-type',
      count: 1,
    },
    {
      what: "another cell's batch, higher term",
      ...batch(
        each((type) => wire({ type, from: member, to: self, term: higher })),
        `${cellId}-other`,
      ),
      reason: 'other-cell',
      count: 1,
    },
    { what: 'a huge length prefix (2^32-1)', bytes: prefixed(0xffff_ffff, randomBytes(random, 64)), reason: 'frame-too-large', count: 1 },
    {
      what: 'a length prefix one above the frame limit',
      bytes: prefixed(64 * 1024 * 1024 + 1, randomBytes(random, 16)),
      reason: 'frame-too-large',
      count: 1,
    },
    {
      what: 'a frame whose payload is not a RaftBatch',
      bytes: prefixed(NOT_A_BATCH.length, NOT_A_BATCH),
      reason: 'undecodable',
      count: 1,
    },
  ];
}

/** Garbage for any port: seeded random bytes of several sizes, a truncated frame, HTTP/2 prefaces followed by junk. */
export function garbage(random: SeededRandom): { what: string; bytes: Buffer }[] {
  const sizes = [1, 3, 4, 5, 64, 4096, 256 * 1024];
  const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
  return [
    ...sizes.map((n) => ({ what: `${n} random bytes`, bytes: randomBytes(random, n) })),
    { what: 'a frame cut short', bytes: prefixed(1_000, randomBytes(random, 100)) },
    { what: 'a truncated HTTP/2 preface', bytes: preface.subarray(0, 11) },
    { what: 'an HTTP/2 preface and random frames', bytes: Buffer.concat([preface, randomBytes(random, 2048)]) },
    {
      what: 'an HTTP/2 preface and a frame with a huge length',
      bytes: Buffer.concat([preface, Buffer.from([0xff, 0xff, 0xff, 0x00, 0x00, 0, 0, 0, 0]), randomBytes(random, 64)]),
    },
    { what: 'an HTTP/1.1 request line with junk', bytes: Buffer.from('GET /\u0000\u0001 HTTP/1.1\r\nHost: x\r\n\r\n') },
  ];
}

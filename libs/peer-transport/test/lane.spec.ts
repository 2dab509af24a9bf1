/**
 * Goal: the lane (routers' unary calls to a cell node as TCP frames on the
 * node's client port) carries calls and their errors both ways, while gRPC
 * keeps working on the same port; a caller's deadline cancels the node's
 * call; a lost connection fails the calls on it NO_LEADER and the next call
 * dials again; a node without the lane is detected (`unsupported`, so the
 * router uses gRPC); bad frames close only the connection that sent them,
 * and bad request bytes or methods get INVALID_ARGUMENT; a frame cut at any
 * byte boundary reads the same.
 * Method: in-process muxed ports on 127.0.0.1:0 over a TolerantServer with
 * a LockService that records what reaches it, and a lane dispatch the test
 * drives; raw sockets for the malformed cases; fast-check for framing.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Server, ServerCredentials, credentials, type ServiceError } from '@grpc/grpc-js';
import { ERROR_CODES, FencerError } from '@fencer/base';
import { TolerantServer, lockservice } from '@fencer/protocol';
import {
  LANE_MAGIC,
  LaneConnectionLost,
  LaneClient,
  type LaneDispatch,
  type LaneMethod,
  type LaneOutcome,
  type LaneResult,
  type MuxedPort,
  limits,
  listenMuxed,
} from '../src/index.js';
import { LaneFrameReader, LaneFrameType, encodeLaneFrame, errorOfPayload, errorPayload } from '../src/lane-frames.js';

interface Held {
  readonly method: LaneMethod;
  readonly request: Record<string, unknown>;
  readonly answer: (o: LaneOutcome) => void;
  cancelled: boolean;
  readonly token?: string | undefined;
}

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A node's client port: gRPC answers GetLock with a fixed lock; the lane hands each call to the test. */
async function node(): Promise<{ port: MuxedPort; held: Held[]; next(): Promise<Held> }> {
  const held: Held[] = [];
  const waiting: ((h: Held) => void)[] = [];
  let taken = 0;
  const server = new TolerantServer();
  server.addService(lockservice.LockServiceService, {
    getLock: (_call: unknown, cb: (e: ServiceError | null, r?: lockservice.GetLockResponse) => void) =>
      cb(null, { lock: undefined, revision: 42 } as unknown as lockservice.GetLockResponse),
  } as unknown as lockservice.LockServiceServer);
  const dispatch: LaneDispatch = (method, request, answer, token) => {
    const h: Held = { method, request: request as Record<string, unknown>, answer, cancelled: false, token };
    held.push(h);
    const w = waiting.shift();
    if (w) {
      taken++;
      w(h);
    }
    return () => (h.cancelled = true);
  };
  const port = await listenMuxed(server, '127.0.0.1:0', { dispatch });
  cleanup.push(() => {
    port.destroy();
    server.forceShutdown();
  });
  return {
    port,
    held,
    /** The next call that reached the node, in order of arrival. */
    next: () => new Promise<Held>((r) => (taken < held.length ? r(held[taken++]!) : waiting.push(r))),
  };
}

function lane(address: string): LaneClient {
  const c = new LaneClient(address);
  cleanup.push(() => c.close());
  return c;
}

const call = (c: LaneClient, method: LaneMethod, request: unknown, deadlineMs = Date.now() + 10_000): Promise<LaneResult> =>
  new Promise((resolve) => c.call(method, request, deadlineMs, resolve));

const acquire = { sessionId: 'ns:1', name: '/ls/ns/x', mode: 1, waitMs: 0, requestId: 'r1', lockDelayMs: 0 };

/** Raw bytes to a port; resolves with what came back once the node closed the connection. */
function raw(address: string, bytes: Buffer): Promise<Buffer> {
  const [host, port] = address.split(':');
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host!, () => s.write(bytes));
    const got: Buffer[] = [];
    s.on('data', (d) => got.push(d));
    s.on('error', reject);
    s.on('close', () => resolve(Buffer.concat(got)));
    s.setTimeout(10_000, () => reject(new Error('the node kept a broken connection open')));
  });
}

describe('lane', () => {
  it('carries a call and its answer, and gRPC works on the same port', async () => {
    const n = await node();
    const c = lane(n.port.address);
    const pending = call(c, 'acquire', acquire);
    const h = await n.next();
    expect(h.method).toBe('acquire');
    expect(h.request).toMatchObject({ sessionId: 'ns:1', name: '/ls/ns/x', requestId: 'r1' });
    h.answer({ ok: true, value: { status: 1, token: 7, holders: [], queuePosition: 0, revision: 9 } });
    const r = await pending;
    expect(r).toMatchObject({ ok: true, value: { token: 7, revision: 9 } });
    expect(n.port.laneConnections).toBe(1);

    const g = new lockservice.LockServiceClient(n.port.address, credentials.createInsecure());
    cleanup.push(() => g.close());
    const res = await new Promise<lockservice.GetLockResponse>((resolve, reject) =>
      g.getLock({ name: '/ls/ns/x' }, (e, v) => (e ? reject(e) : resolve(v))),
    );
    expect(res.revision).toBe(42);
  });

  it("carries a node's error with its reason and leader-hint", async () => {
    const n = await node();
    const c = lane(n.port.address);
    const pending = call(c, 'release', { sessionId: 'ns:1', name: '/ls/ns/x', token: 3 });
    (await n.next()).answer({ ok: false, error: new FencerError('NOT_LEADER', 'not the leader', '127.0.0.1:7003') });
    const r = await pending;
    expect(r.ok).toBe(false);
    const e = (r as { error: FencerError }).error;
    expect([e.code, e.message, e.leaderHint]).toEqual(['NOT_LEADER', 'not the leader', '127.0.0.1:7003']);
  });

  it('keeps many calls in flight on one connection and matches answers given out of order', async () => {
    const n = await node();
    const c = lane(n.port.address);
    const pending = [0, 1, 2, 3, 4].map((i) => call(c, 'getLock', { name: `/ls/ns/${i}` }));
    for (let i = 0; i < 5; i++) await n.next();
    for (const h of [...n.held].reverse()) h.answer({ ok: true, value: { revision: Number(String(h.request.name).slice(-1)) } });
    const rs = await Promise.all(pending);
    expect(rs.map((r) => (r as { value: { revision: number } }).value.revision)).toEqual([0, 1, 2, 3, 4]);
    expect(n.port.laneConnections).toBe(1);
  });

  it("cancels the node's call at the caller's deadline and answers DEADLINE_EXCEEDED", async () => {
    const n = await node();
    const c = lane(n.port.address);
    const pending = call(c, 'acquire', { ...acquire, waitMs: 60_000 }, Date.now() + 300);
    const h = await n.next();
    const r = await pending;
    expect((r as { error: FencerError }).error.code).toBe('DEADLINE_EXCEEDED');
    await expect.poll(() => h.cancelled, { timeout: 5_000 }).toBe(true);
  });

  it('waits out a deadline beyond what one timer can hold instead of failing at once', async () => {
    const n = await node();
    const c = lane(n.port.address);
    const pending = call(c, 'acquire', acquire, Date.now() + 40 * 24 * 3600 * 1000);
    const h = await n.next();
    // Answered after a full turn of the event loop: a timer that overflowed would have fired by now.
    await new Promise((r) => setTimeout(r, 20));
    h.answer({ ok: true, value: { status: 1, token: 1, holders: [], queuePosition: 0, revision: 1 } });
    expect((await pending).ok).toBe(true);
  });

  it('drops a connection that went silent (a PING unanswered) and dials a new one for the next call', async () => {
    // A node that answers the handshake, then swallows everything, as a cut link does.
    const sockets: net.Socket[] = [];
    const closed: Promise<void>[] = [];
    const hole = net.createServer((s) => {
      sockets.push(s);
      closed.push(new Promise((r) => s.on('close', () => r())));
      s.once('data', () => s.write(LANE_MAGIC));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => {
      for (const s of sockets) s.destroy();
      hole.close();
    });
    const c = lane(`127.0.0.1:${(hole.address() as net.AddressInfo).port}`);
    const r = await call(c, 'getLock', { name: '/ls/ns/x' }, Date.now() + 200);
    expect((r as { error: FencerError }).error.code).toBe('DEADLINE_EXCEEDED');
    await closed[0];
    const next = call(c, 'getLock', { name: '/ls/ns/x' }, Date.now() + 200);
    await expect.poll(() => sockets.length, { timeout: 5_000 }).toBe(2);
    expect((await next).ok).toBe(false);
  });

  it('drops a connection silent while a call waits (a node frozen with its sockets open), long before the deadline', async () => {
    // Answers the handshake, then nothing: a process stopped with SIGSTOP, or a partition.
    const sockets: net.Socket[] = [];
    const frozen = net.createServer((s) => {
      sockets.push(s);
      s.once('data', () => s.write(LANE_MAGIC));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => frozen.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => {
      for (const s of sockets) s.destroy();
      frozen.close();
    });
    const c = lane(`127.0.0.1:${(frozen.address() as net.AddressInfo).port}`);
    const r = await call(c, 'acquire', { ...acquire, waitMs: 60_000 }, Date.now() + 60_000);
    // Well before the call's deadline, as a lost connection, so that a router looks for the new leader.
    expect((r as { error: FencerError }).error).toBeInstanceOf(LaneConnectionLost);
  });

  it('keeps a connection whose node answers the PING after a call outlived its deadline', async () => {
    const n = await node();
    const c = lane(n.port.address);
    const r = await call(c, 'acquire', { ...acquire, waitMs: 60_000 }, Date.now() + 200);
    expect((r as { error: FencerError }).error.code).toBe('DEADLINE_EXCEEDED');
    await expect.poll(() => c.probesAnswered, { timeout: 5_000 }).toBe(1);
    const next = call(c, 'getLock', { name: '/ls/ns/after' });
    let h = await n.next();
    if (h.method === 'acquire') h = await n.next();
    h.answer({ ok: true, value: { revision: 5 } });
    expect(await next).toMatchObject({ ok: true, value: { revision: 5 } });
    expect(n.port.laneConnections).toBe(1);
  });

  it("cancels the node's call when the caller cancels", async () => {
    const n = await node();
    const c = lane(n.port.address);
    let answered = false;
    const cancel = c.call('acquire', { ...acquire, waitMs: 60_000 }, Date.now() + 30_000, () => (answered = true));
    const h = await n.next();
    cancel();
    await expect.poll(() => h.cancelled, { timeout: 5_000 }).toBe(true);
    expect(answered).toBe(false);
  });

  it('fails the calls on a lost connection NO_LEADER, cancels them on the node, and dials again for the next call', async () => {
    const n = await node();
    const c = lane(n.port.address);
    const pending = call(c, 'acquire', acquire);
    const h = await n.next();
    n.port.destroy();
    const r = await pending;
    expect((r as { error: FencerError }).error.code).toBe('NO_LEADER');
    await expect.poll(() => h.cancelled, { timeout: 5_000 }).toBe(true);
    // The listener is gone too: a new call is refused, again as NO_LEADER.
    const again = await call(c, 'getLock', { name: '/ls/ns/x' });
    expect((again as { error: FencerError }).error.code).toBe('NO_LEADER');
  });

  it('fails a call to an address that is not host:port NO_LEADER instead of throwing', async () => {
    const c = lane('localhost');
    const r = await call(c, 'getLock', { name: '/ls/ns/x' });
    expect((r as { error: FencerError }).error.code).toBe('NO_LEADER');
    expect((r as { error: FencerError }).error.message).toMatch(/"localhost" is not host:port/);
  });

  it('says unsupported for a node that speaks only gRPC, and stays off it', async () => {
    const server = new Server();
    server.addService(lockservice.LockServiceService, {} as lockservice.LockServiceServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    cleanup.push(() => server.forceShutdown());
    const c = lane(`127.0.0.1:${port}`);
    expect(await call(c, 'getLock', { name: '/ls/ns/x' })).toEqual({ ok: false, unsupported: true });
    expect(c.available).toBe(false);
  });

  it("carries the caller's token with its call (CALL_WITH_TOKEN), and none when the caller has none", async () => {
    const n = await node();
    const c = lane(n.port.address);
    const withToken = new Promise<LaneResult>((resolve) => c.call('getLock', { name: '/ls/ns/x' }, Date.now() + 10_000, resolve, 'tok-1'));
    const first = await n.next();
    expect(first).toMatchObject({ method: 'getLock', request: { name: '/ls/ns/x' }, token: 'tok-1' });
    first.answer({ ok: true, value: { lock: undefined, revision: 7 } });
    expect(await withToken).toMatchObject({ ok: true });
    const without = call(c, 'getLock', { name: '/ls/ns/y' });
    const second = await n.next();
    expect(second.token).toBeUndefined();
    second.answer({ ok: true, value: { lock: undefined, revision: 8 } });
    await without;
    // A token length that runs past the frame is that call's INVALID_ARGUMENT; the connection keeps serving.
    const lying = Buffer.from([0x00, 0xff, 0x41]);
    const answers = await rawFrames(
      n.port.address,
      Buffer.concat([
        LANE_MAGIC,
        encodeLaneFrame(LaneFrameType.CALL_WITH_TOKEN, 1, lying, 5),
        encodeLaneFrame(LaneFrameType.PING, 2, Buffer.alloc(0)),
      ]),
      2,
    );
    expect(answers.map((f) => f.type)).toEqual([LaneFrameType.ERROR, LaneFrameType.PONG]);
    expect(JSON.parse(answers[0]!.payload.toString())).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/token/) });
  });

  it('answers undecodable request bytes and unknown methods INVALID_ARGUMENT, on a connection that keeps serving', async () => {
    const n = await node();
    const bad = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]);
    const frames = Buffer.concat([
      LANE_MAGIC,
      encodeLaneFrame(LaneFrameType.CALL, 1, bad, 2),
      encodeLaneFrame(LaneFrameType.CALL, 2, Buffer.alloc(0), 200),
      encodeLaneFrame(LaneFrameType.CALL, 3, Buffer.alloc(0)),
    ]);
    const answers = await rawFrames(n.port.address, frames, 3);
    expect(answers.map((f) => f.type)).toEqual([LaneFrameType.ERROR, LaneFrameType.ERROR, LaneFrameType.ERROR]);
    const errors = answers.map((f) => JSON.parse(f.payload.toString()) as { code: string; message: string });
    expect(errors.map((e) => e.code)).toEqual(['INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT']);
    expect(errors[0]!.message).toMatch(/Acquire: the request is not a valid message/);
    expect(errors[1]!.message).toMatch(/names no known method/);
    expect(n.held).toEqual([]);
  });

  it.each([
    ['a frame over the size limit', () => Buffer.from([0x7f, 0xff, 0xff, 0xff, LaneFrameType.CALL, 0, 0, 0, 1])],
    ['an unknown frame type', () => encodeLaneFrame(9, 1, Buffer.from('x'))],
    ["a frame type that is the node's to send", () => encodeLaneFrame(LaneFrameType.OK, 1, Buffer.from('x'))],
    ['a call id reused while in flight', () => Buffer.concat([callFrame(5), callFrame(5)])],
  ])('closes a connection that sends %s; the port keeps serving lane and gRPC', async (_name, bytes) => {
    const n = await node();
    await raw(n.port.address, Buffer.concat([LANE_MAGIC, bytes()]));
    // A call that reached the node before the connection broke is cancelled with it.
    for (const h of n.held) expect(h.cancelled).toBe(true);
    const c = lane(n.port.address);
    const pending = call(c, 'getLock', { name: '/ls/ns/y' });
    let h = await n.next();
    if (h.request.name === '/ls/ns/held') h = await n.next();
    expect(h.request.name).toBe('/ls/ns/y');
    h.answer({ ok: true, value: { revision: 1 } });
    expect((await pending).ok).toBe(true);
    const g = new lockservice.LockServiceClient(n.port.address, credentials.createInsecure());
    cleanup.push(() => g.close());
    const e = await new Promise<ServiceError | null>((resolve) => g.getLock({ name: '/ls/ns/x' }, (err) => resolve(err)));
    expect(e).toBeNull();
  });

  it('hands a connection that does not start with the lane magic to gRPC, garbage included', async () => {
    const n = await node();
    // What HTTP/2 makes of garbage is HTTP/2's business: the port closes it and keeps serving.
    await raw(n.port.address, Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    await raw(n.port.address, Buffer.from('FENCER-LANX/1\n garbage'));
    const g = new lockservice.LockServiceClient(n.port.address, credentials.createInsecure());
    cleanup.push(() => g.close());
    const e = await new Promise<ServiceError | null>((resolve) => g.getLock({ name: '/ls/ns/x' }, (err) => resolve(err)));
    expect(e).toBeNull();
    expect(n.port.laneConnections).toBe(0);
  });

  it('an error frame keeps every code, message and leader-hint; an unknown code or a broken payload reads INTERNAL', () => {
    for (const code of ERROR_CODES) {
      const back = errorOfPayload(
        errorPayload(new FencerError(code, `because ${code}`, code === 'NOT_LEADER' ? '127.0.0.1:1' : undefined)),
      );
      expect([back.code, back.message, back.leaderHint]).toEqual([
        code,
        `because ${code}`,
        code === 'NOT_LEADER' ? '127.0.0.1:1' : undefined,
      ]);
    }
    expect(errorOfPayload(Buffer.from('{"code":"NO_SUCH","message":"m"}')).code).toBe('INTERNAL');
    expect(errorOfPayload(Buffer.from('not json')).code).toBe('INTERNAL');
  });
});

describe('lane framing', () => {
  it('reads the same frames whatever the chunk boundaries', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(1, 2, 3, 4), fc.nat({ max: 0xffffffff }), fc.uint8Array({ maxLength: 300 })), { maxLength: 12 }),
        fc.array(fc.nat({ max: 50 }), { maxLength: 30 }),
        (frames, cuts) => {
          const bytes = Buffer.concat(frames.map(([t, id, p]) => encodeLaneFrame(t, id, p)));
          const r = new LaneFrameReader();
          const got: [number, number, number[]][] = [];
          let at = 0;
          for (const cut of [...cuts, bytes.length]) {
            const end = Math.min(bytes.length, at + cut);
            const { frames: read, error } = r.push(bytes.subarray(at, end));
            expect(error).toBeUndefined();
            for (const f of read) got.push([f.type, f.id, [...f.payload]]);
            at = end;
          }
          expect(got).toEqual(frames.map(([t, id, p]) => [t, id, [...p]]));
        },
      ),
    );
  });

  it(`refuses a frame longer than ${limits.laneFrameBytesMax} bytes from its header alone`, () => {
    const header = Buffer.alloc(9);
    header.writeUInt32BE(limits.laneFrameBytesMax + 1, 0);
    header.writeUInt8(LaneFrameType.CALL, 4);
    expect(new LaneFrameReader().push(header).error).toMatch(/over the .*limit/);
  });

  it('refuses a frame of an unknown type from its header alone, and stays broken', () => {
    const reader = new LaneFrameReader();
    const header = encodeLaneFrame(9, 1, Buffer.alloc(100)).subarray(0, 9);
    expect(reader.push(header).error).toMatch(/unknown lane frame type 9/);
    // Nothing after a broken frame is read, however well-formed.
    expect(reader.push(encodeLaneFrame(LaneFrameType.PING, 2, Buffer.alloc(0)))).toEqual({
      frames: [],
      error: expect.stringMatching(/type 9/),
    });
  });
});

function callFrame(id: number): Buffer {
  return encodeLaneFrame(LaneFrameType.CALL, id, Buffer.from(lockservice.GetLockRequest.encode({ name: '/ls/ns/held' }).finish()), 5);
}

/** Sends the magic and frames on a raw socket; resolves with the first `count` frames the node sends back after its magic. */
function rawFrames(address: string, bytes: Buffer, count: number): Promise<{ type: number; id: number; payload: Buffer }[]> {
  const [host, port] = address.split(':');
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host!, () => s.write(bytes));
    let buf = Buffer.alloc(0);
    const reader = new LaneFrameReader();
    const got: { type: number; id: number; payload: Buffer }[] = [];
    s.on('data', (d) => {
      if (buf.length < LANE_MAGIC.length) {
        buf = Buffer.concat([buf, d]);
        if (buf.length < LANE_MAGIC.length) return;
        expect(buf.subarray(0, LANE_MAGIC.length).equals(LANE_MAGIC)).toBe(true);
        d = buf.subarray(LANE_MAGIC.length);
      }
      got.push(...reader.push(d).frames);
      if (got.length >= count) {
        s.destroy();
        resolve(got.slice(0, count));
      }
    });
    s.on('error', reject);
    s.setTimeout(10_000, () => reject(new Error(`only ${got.length} of ${count} answers`)));
  });
}

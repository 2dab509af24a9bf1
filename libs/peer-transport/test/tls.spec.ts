/**
 * Goal: with mutual TLS, a peer port (TCP frames or the gRPC stream) takes
 * Raft traffic only from certificates naming a replica of its own cell: a
 * replica of another cell, a router, a plaintext client and an expired
 * certificate are refused and counted by reason, and nothing they send
 * reaches the core; a dialing replica refuses a server of another cell. A
 * node's client port chooses the lane or gRPC by ALPN and tells a gRPC
 * handler who its caller is. Certificates reload without a restart: a new
 * file (polled) and SIGHUP both change what the server presents.
 * Method: certificates from tools/scripts/dev-ca.mjs (openssl) in a temp
 * folder; real servers and transports on 127.0.0.1 ephemeral ports; every
 * wait is for an event, with a generous timeout. Without openssl the file
 * skips and says so (and fails under CI=true).
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Metadata, type ServiceError, credentials, status } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { EntryType, type Message } from '@fencer/raft';
import { TolerantServer, lockservice } from '@fencer/protocol';
import { TlsFiles, type TlsPaths } from '@fencer/service';
import { issueTestCerts, opensslMissing } from '@fencer/service/testing';
import {
  ALPN,
  GrpcPeerTransport,
  LaneClient,
  type LaneDispatch,
  type LaneResult,
  type PeerLogger,
  TcpPeerServer,
  TcpPeerTransport,
  anyReplica,
  dialTls,
  grpcChannelCredentials,
  kindsOf,
  listenGrpcTls,
  listenMuxed,
  raftTransportHandlers,
  raftTransportService,
  replicaOfCell,
} from '../src/index.js';

const missing = opensslMissing();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`tls.spec: ${missing}; CI=true needs it (.ci/run installs it)`);
if (missing !== undefined) console.warn(`tls.spec: skipped: ${missing}`);

const dir = mkdtempSync(path.join(tmpdir(), 'fencer-tls-spec-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const certs: Record<string, TlsPaths> =
  missing === undefined
    ? {
        ...issueTestCerts(dir, [
          { name: 'a1', cell: 'cell-1' },
          { name: 'b1', cell: 'cell-1' },
          { name: 'x2', cell: 'cell-2' },
          { name: 'r1', kind: 'router' },
        ]),
        ...issueTestCerts(dir, [{ name: 'old1', cell: 'cell-1' }], { days: 0 }),
      }
    : {};

const a = NodeId('a1');
const b = NodeId('b1');
const append = (i: number, from: NodeId = a): Message => ({
  type: 'AppendEntries',
  from,
  to: b,
  term: Term(3),
  index: LogIndex(i - 1),
  logTerm: Term(3),
  commit: LogIndex(i - 1),
  entries: [{ term: Term(3), index: LogIndex(i), type: EntryType.Normal, data: new Uint8Array([i & 0xff]) }],
});

const quiet = (): PeerLogger => pino({ level: 'silent' });
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function files(name: string): TlsFiles {
  const f = new TlsFiles(certs[name]!);
  cleanups.push(() => f.stop());
  return f;
}

/** Resolves when `check` holds, polling on the event loop (it waits for the event, with a timeout). */
async function until(check: () => boolean, what: string, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function tcpTransport(cellId: string, tlsFiles: TlsFiles | undefined): TcpPeerTransport {
  const t = new TcpPeerTransport({
    selfId: a,
    cellId,
    sendQueueMax: 1_000,
    reconnectDelayMs: 20,
    logger: quiet(),
    onUnreachable: () => {},
    ...(tlsFiles ? { tls: tlsFiles } : {}),
  });
  cleanups.push(() => t.close());
  return t;
}

async function tcpPeerServer(): Promise<{ address: string; got: Message[]; refused: string[] }> {
  const got: Message[] = [];
  const refused: string[] = [];
  const server = new TcpPeerServer('cell-1', (m) => got.push(m), quiet(), { tls: files('b1'), onRefused: (r) => refused.push(r) });
  await server.listen('127.0.0.1:0');
  cleanups.push(() => server.close());
  return { address: `127.0.0.1:${server.port}`, got, refused };
}

/** Sends messages every 20 ms until `done` holds (a refused link keeps reconnecting), then stops. */
async function keepSending(t: TcpPeerTransport | GrpcPeerTransport, done: () => boolean, what: string, from = a): Promise<void> {
  let i = 1;
  const timer = setInterval(() => t.send([append(i++, from)]), 20);
  try {
    await until(done, what);
  } finally {
    clearInterval(timer);
  }
}

describe.skipIf(missing !== undefined)('mutual TLS on peer links', () => {
  it('TCP frames: a replica of the same cell gets through', async () => {
    const s = await tcpPeerServer();
    const t = tcpTransport('cell-1', files('a1'));
    t.setPeer(b, s.address);
    await keepSending(t, () => s.got.length >= 3, 'three messages over TLS');
    expect(s.refused).toEqual([]);
  });

  it('TCP frames: a replica of another cell is refused by its certificate, even when its batches name this cell', async () => {
    const s = await tcpPeerServer();
    // The forger's batches say cell-1; only its certificate says cell-2.
    const t = tcpTransport('cell-1', files('x2'));
    t.setPeer(b, s.address);
    await keepSending(t, () => s.refused.length >= 2, 'two refusals');
    expect(new Set(s.refused)).toEqual(new Set(['foreign-certificate']));
    expect(s.got).toEqual([]);
  });

  it('TCP frames: a router certificate, a plaintext client and an expired certificate are refused', async () => {
    const s = await tcpPeerServer();
    const router = tcpTransport('cell-1', files('r1'));
    router.setPeer(b, s.address);
    await keepSending(router, () => s.refused.includes('foreign-certificate'), 'the router refused');
    router.close();

    const plain = tcpTransport('cell-1', undefined);
    plain.setPeer(b, s.address);
    await keepSending(plain, () => s.refused.includes('tls-handshake'), 'the plaintext client refused');
    plain.close();

    // old1's validity ended the second it was made: wait until that second has passed.
    await new Promise((r) => setTimeout(r, 1_100));
    const before = s.refused.filter((r) => r === 'tls-handshake').length;
    const expired = tcpTransport('cell-1', files('old1'));
    expired.setPeer(b, s.address);
    await keepSending(expired, () => s.refused.filter((r) => r === 'tls-handshake').length > before, 'the expired certificate refused');
    expect(s.got).toEqual([]);
  });

  it('a dialing replica refuses a server that is a replica of another cell', async () => {
    const server = tls.createServer({ ...files('x2').serverOptions([ALPN.peer]) }, (sock) => sock.destroy());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const socket = dialTls(`127.0.0.1:${(server.address() as net.AddressInfo).port}`, files('a1'), [ALPN.peer], replicaOfCell('cell-1'));
    const err = await new Promise<Error>((resolve) => socket.once('error', resolve));
    expect(err.message).toMatch(/replica x2 of cell cell-2 is not a replica of cell cell-1/);
  });

  it('gRPC stream: the same cell gets through; another cell is refused at the handshake', async () => {
    const got: Message[] = [];
    const refused: string[] = [];
    const server = new TolerantServer();
    server.addService(raftTransportService, raftTransportHandlers({ cellId: 'cell-1', onMessage: (m) => got.push(m) }, quiet()));
    const port = await listenGrpcTls(server, '127.0.0.1:0', {
      files: files('b1'),
      accepts: replicaOfCell('cell-1'),
      onRefused: (r) => refused.push(r),
    });
    cleanups.push(() => server.forceShutdown());
    cleanups.push(() => port.close());
    const transport = (name: string): GrpcPeerTransport => {
      const t = new GrpcPeerTransport({
        selfId: a,
        cellId: 'cell-1',
        sendQueueMax: 1_000,
        reconnectDelayMs: 20,
        logger: quiet(),
        onUnreachable: () => {},
        tls: files(name),
      });
      cleanups.push(() => t.close());
      t.setPeer(b, port.address);
      return t;
    };
    await keepSending(transport('a1'), () => got.length >= 3, 'three messages over gRPC with TLS');
    // The forger sends as a member of cell-1 would (its batches name cell-1, its messages come from b1).
    await keepSending(transport('x2'), () => refused.includes('foreign-certificate'), 'the other cell refused', b);
    expect(got.filter((m) => m.from === b)).toEqual([]);
  });
});

describe.skipIf(missing !== undefined)('mutual TLS on a client port', () => {
  async function clientPort(): Promise<{ address: string; callers: string[]; port: Awaited<ReturnType<typeof listenMuxed>> }> {
    const callers: string[] = [];
    const server = new TolerantServer();
    let port: Awaited<ReturnType<typeof listenMuxed>>;
    server.addService(lockservice.LockServiceService, {
      getLock: (call: { getPeer(): string }, cb: (e: ServiceError | null, r?: unknown) => void) => {
        const id = port.identityByPeer(call.getPeer());
        callers.push(id?.kind === 'router' ? `router ${id.name}` : String(id?.kind));
        cb(null, { revision: 42 });
      },
    } as unknown as lockservice.LockServiceServer);
    const dispatch: LaneDispatch = (_m, _r, answer) => {
      answer({ ok: true, value: { revision: 7 } });
      return () => {};
    };
    port = await listenMuxed(server, '127.0.0.1:0', { dispatch, tls: { files: files('a1'), accepts: kindsOf('router', 'replica') } });
    cleanups.push(() => server.forceShutdown());
    cleanups.push(() => port.destroy());
    return { address: port.address, callers, port };
  }

  it('serves the lane by ALPN and gRPC beside it, and tells a handler who calls', async () => {
    const { address, callers } = await clientPort();
    const lane = new LaneClient(address, { files: files('r1'), accepts: anyReplica });
    cleanups.push(() => lane.close());
    const r = await new Promise<LaneResult>((resolve) => lane.call('getLock', { name: '/ls/ns/x' }, Date.now() + 10_000, resolve));
    expect(r).toMatchObject({ ok: true, value: { revision: 7 } });

    const client = new lockservice.LockServiceClient(address, grpcChannelCredentials(files('r1'), anyReplica));
    cleanups.push(() => client.close());
    const res = await new Promise<lockservice.GetLockResponse>((resolve, reject) =>
      client.getLock({ name: '/ls/ns/x' }, new Metadata(), (e, v) => (e ? reject(e) : resolve(v))),
    );
    expect(res.revision).toBe(42);
    expect(callers).toEqual(['router r1']);
  });

  it('refuses a plaintext gRPC client and a certificate of a kind it does not take', async () => {
    const { address } = await clientPort();
    const plain = new lockservice.LockServiceClient(address, credentials.createInsecure());
    cleanups.push(() => plain.close());
    const e1 = await new Promise<ServiceError>((resolve) =>
      plain.getLock({ name: '/ls/ns/x' }, new Metadata(), { deadline: Date.now() + 5_000 }, (e) => resolve(e!)),
    );
    expect(e1.code).toBe(status.UNAVAILABLE);
    const dir2 = mkdtempSync(path.join(tmpdir(), 'fencer-tls-op-'));
    cleanups.push(() => rmSync(dir2, { recursive: true, force: true }));
    // An operator certificate from the same CA: valid, but not a kind this port takes.
    copyFileSync(path.join(dir, 'ca.crt'), path.join(dir2, 'ca.crt'));
    copyFileSync(path.join(dir, 'ca.key'), path.join(dir2, 'ca.key'));
    const op = issueTestCerts(dir2, [{ name: 'op', kind: 'operator' }])['op']!;
    const opFiles = new TlsFiles(op);
    const c = new lockservice.LockServiceClient(address, grpcChannelCredentials(opFiles, anyReplica));
    cleanups.push(() => c.close());
    const e2 = await new Promise<ServiceError>((resolve) =>
      c.getLock({ name: '/ls/ns/x' }, new Metadata(), { deadline: Date.now() + 5_000 }, (e) => resolve(e!)),
    );
    expect(e2.code).toBe(status.UNAVAILABLE);
  });
});

describe.skipIf(missing !== undefined)('certificate reload', () => {
  /** The URI SAN of the certificate a TLS server at `port` presents now. */
  async function presented(port: number): Promise<string> {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      ...files('r1').clientOptions([ALPN.peer]),
      checkServerIdentity: () => undefined,
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', () => resolve());
      socket.once('error', reject);
    });
    const san = socket.getPeerCertificate().subjectaltname ?? '';
    socket.destroy();
    return san;
  }

  it('a server presents a new certificate after its file changes, and after SIGHUP', async () => {
    const live = mkdtempSync(path.join(tmpdir(), 'fencer-tls-live-'));
    cleanups.push(() => rmSync(live, { recursive: true, force: true }));
    const put = (name: string): void => {
      copyFileSync(certs[name]!.cert, path.join(live, 'node.crt'));
      copyFileSync(certs[name]!.key, path.join(live, 'node.key'));
    };
    put('b1');
    const watched = new TlsFiles({ cert: path.join(live, 'node.crt'), key: path.join(live, 'node.key'), ca: certs['b1']!.ca }).start();
    cleanups.push(() => watched.stop());
    const server = new TcpPeerServer('cell-1', () => {}, quiet(), { tls: watched });
    await server.listen('127.0.0.1:0');
    cleanups.push(() => server.close());
    expect(await presented(server.port)).toContain('fencer://cell/cell-1/b1');

    let reloads = 0;
    watched.onReload(() => reloads++);
    put('a1');
    await until(() => reloads === 1, 'the poll to see the new files');
    expect(await presented(server.port)).toContain('fencer://cell/cell-1/a1');

    // SIGHUP: the files change under a poll that has not looked yet, and the signal makes it look now.
    put('b1');
    process.emit('SIGHUP', 'SIGHUP');
    expect(reloads).toBe(2);
    expect(await presented(server.port)).toContain('fencer://cell/cell-1/b1');
  });

  it('a reload that fails keeps the material it had and reports why', () => {
    const errors: string[] = [];
    const live = mkdtempSync(path.join(tmpdir(), 'fencer-tls-bad-'));
    cleanups.push(() => rmSync(live, { recursive: true, force: true }));
    copyFileSync(certs['a1']!.cert, path.join(live, 'n.crt'));
    copyFileSync(certs['a1']!.key, path.join(live, 'n.key'));
    const f = new TlsFiles({ cert: path.join(live, 'n.crt'), key: path.join(live, 'n.key'), ca: certs['a1']!.ca }, (e) =>
      errors.push(e.message),
    );
    const before = f.current;
    copyFileSync(certs['b1']!.key, path.join(live, 'n.key'));
    f.reload();
    expect(f.current).toBe(before);
    expect(errors[0]).toMatch(/do not make a usable context/);
  });
});

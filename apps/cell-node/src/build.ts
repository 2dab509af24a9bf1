/**
 * buildCellNode(deps): one cell node with every socket it serves, from its
 * configuration and an injected clock, randomness, logger and metrics. It
 * opens the WAL, composes libs/cell's LockCell with real timers, and serves:
 * - the client port (--listen): the lock service and the internal
 *   HeartbeatBatch over gRPC, and beside them on the same port the routers'
 *   lane (unary calls as TCP frames, @fencer/peer-transport); nothing
 *   else (peer traffic never reaches it);
 * - the peer port (--peer-listen): Raft messages, as TCP frames or, with
 *   --peer-transport grpc, the RaftTransport gRPC stream; a cell uses one
 *   of the two on every member; a batch for another cell, or from a sender
 *   it does not take (@fencer/peer-transport admitsSender), closes the stream;
 * - the admin port and the Prometheus metrics port.
 * With --tls-cert/--tls-key/--tls-ca every port but metrics speaks mutual
 * TLS (decision 0016): the peer port takes replicas of this cell only, the
 * admin port a control plane or an operator, the client port any holder the
 * CA signed, with the lane chosen by ALPN; the node dials its peers and its
 * leader the same way. Certificates reload on file change or SIGHUP.
 * main.ts only parses the command line, handles signals and exits.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { type Clock, NodeId, type Random, assert } from '@fencer/base';
import { type Cancel, type LockCellTestHooks, TIMER_DELAY_MS_MAX } from '@fencer/cell';
import { TolerantServer, adminpb, internalpb, lockservice } from '@fencer/protocol';
import {
  GrpcPeerTransport,
  type GrpcTlsPort,
  type PeerServerChecks,
  kindsOf,
  listenGrpcTls,
  replicaOfCell,
  type PeerTransportOptions,
  type RaftPeerTransport,
  TcpPeerServer,
  TcpPeerTransport,
  admitsSender,
  listenMuxed,
  type MuxedPort,
  raftTransportHandlers,
  raftTransportService,
} from '@fencer/peer-transport';
import { NodeDisk } from '@fencer/wal/node';
import { openRaftLogStore, type WalStore } from '@fencer/wal';
import { type SyncPolicyView, walSyncOnLoop } from './wal-sync-policy.js';
import { timedDisk } from './timed-disk.js';
import type { CellNodeConfig } from './config.js';
import { type Logger, TlsFiles, grpcIdleServerOptions, serveMetrics } from '@fencer/service';
import type { NodeMetrics } from './metrics.js';
import { CellNode } from './node.js';
import { GrpcForwarder, LaneForwarder } from './forwarder.js';
import { CatchUpTracker, type ReplicaView } from './readiness.js';
import { LockServiceImpl, internalHandlers, lockServiceHandlers } from './lock-service.js';
import { adminHandlers } from './admin-service.js';

export interface CellNodeDeps {
  readonly config: CellNodeConfig;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly metrics: NodeMetrics;
  /** A storage failure: the process must exit (an fsync is never retried). */
  readonly onFatal: (error: Error) => void;
  /** Monotonic milliseconds for WAL fsync timing. */
  readonly nowMs: () => number;
  /** Planted bugs for the chaos harness's own entry point only; main.ts never sets them. */
  readonly testHooks?: LockCellTestHooks;
}

export interface CellNodeApp {
  readonly node: CellNode;
  /** Hands leadership away (when leading), stops serving, and closes the log. */
  close(): Promise<void>;
}

const grpcOptions = (config: CellNodeConfig) => ({
  'grpc.max_receive_message_length': config.grpcMessageBytesMax,
  'grpc.max_send_message_length': 64 * 1024 * 1024,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.http2.min_ping_interval_without_data_ms': 5_000,
  // Channelz (grpc-js's introspection service, which nothing here serves) costs bookkeeping on every call.
  'grpc.enable_channelz': 0,
  // A connection with no call for a while gets GOAWAY (slow-loris; @fencer/service connection-guard.ts).
  ...grpcIdleServerOptions(),
});

/** Real timers for the cell; delays above Node's limit are chained by the cell and refused here. */
function after(ms: number, run: () => void): Cancel {
  assert(ms >= 0 && ms <= TIMER_DELAY_MS_MAX, `a timer of ${ms} ms would fire at once in Node`);
  const t = setTimeout(run, ms);
  return () => clearTimeout(t);
}

function bind(s: Server, address: string): Promise<void> {
  return new Promise((resolve, reject) =>
    s.bindAsync(address, ServerCredentials.createInsecure(), (err) =>
      err ? reject(new Error(`cannot listen on ${address}: ${err.message}`)) : resolve(),
    ),
  );
}

function openStore(
  config: CellNodeConfig,
  metrics: NodeMetrics,
  syncView: SyncPolicyView,
  nowMs: () => number,
): Promise<{ store: WalStore; disk: NodeDisk }> {
  const nodeDisk = new NodeDisk({ syncOnLoop: walSyncOnLoop(config.walSyncOnLoop, syncView) });
  const disk = timedDisk(nodeDisk, (kind, seconds) => metrics.walFsync.observe({ kind }, seconds), nowMs);
  return new Promise((resolve, reject) =>
    openRaftLogStore(disk, config.dataDir, {}, (err, s) =>
      err || !s
        ? reject(new Error(`cannot open the log in ${config.dataDir}: ${err?.message ?? 'no store'}`))
        : resolve({ store: s, disk: nodeDisk }),
    ),
  );
}

export async function buildCellNode(deps: CellNodeDeps): Promise<CellNodeApp> {
  const { config, logger, metrics } = deps;
  // The WAL opens before the node exists; until then (recovery) the node counts as an idle follower.
  const syncView: SyncPolicyView = { isLeader: () => false, callsInFlight: () => 0 };
  const { store, disk } = await openStore(config, metrics, syncView, deps.nowMs);
  metrics.watchWal(
    () => store.stats,
    () => disk.stats,
  );
  if (store.recovery.truncatedAt) logger.warn({ truncatedAt: store.recovery.truncatedAt }, 'recovery cut a torn tail off the log');

  const tlsFiles = openTls(config, logger);
  const leaderTls = tlsFiles ? { files: tlsFiles, accepts: replicaOfCell(config.cellId) } : undefined;
  let transport: RaftPeerTransport | undefined;
  // Unary calls reach the leader by its lane (cheaper for the leader than a gRPC call), heartbeats by gRPC.
  const forwarder = new LaneForwarder(
    new GrpcForwarder(config.id, leaderTls),
    (transport) => metrics.forwarded.inc({ transport }),
    undefined,
    leaderTls,
  );
  const node = new CellNode(
    config,
    store,
    {
      clock: deps.clock,
      random: deps.random,
      logger,
      metrics: metrics.cellMetrics(),
      send: (m) => transport?.send(m),
      onFatal: deps.onFatal,
      after,
    },
    forwarder,
    deps.testHooks,
  );
  syncView.isLeader = () => node.isLeader;
  transport = connectPeers(deps, node, tlsFiles);

  const service = new LockServiceImpl(node, metrics);
  syncView.callsInFlight = () => service.callsInFlight;
  // Request bytes that do not decode get INVALID_ARGUMENT, on the client and admin ports alike.
  const server = new TolerantServer(grpcOptions(config));
  server.addService(lockservice.LockServiceService, lockServiceHandlers(service));
  server.addService(internalpb.CellInternalService, internalHandlers(service));
  const adminServer = new TolerantServer(grpcOptions(config));
  adminServer.addService(adminpb.CellAdminService, adminHandlers(node));

  // Twice the election timeout: a follower that long without its leader's word is cut off from it.
  const catchUp = new CatchUpTracker(deps.nowMs, 2 * config.electionTicks * config.tickMs);
  const closePeers = await servePeers(deps, node, transport, catchUp, tlsFiles);
  const { clientPort, adminPort } = await serveClientsAndAdmin(deps, server, adminServer, service, tlsFiles);
  const metricsServer = await serveMetrics(config.metricsListen, metrics.registry, {
    ready: () => catchUp.check(replicaView(node)),
    live: () => (node.replica.stopped ? { ok: false, reason: 'the replica has stopped' } : { ok: true }),
  });

  const ticker = setInterval(() => node.tick(), config.tickMs);
  logger.info(
    {
      id: config.id,
      listen: config.listen,
      peerListen: config.peerListen,
      peerTransport: config.peerTransport,
      admin: config.adminListen,
      metrics: config.metricsListen,
      tls: config.tls !== undefined,
    },
    'cell node serving',
  );

  const close = async (): Promise<void> => {
    await handOffLeadership(node, config, logger);
    node.cell.close();
    await stopServing([server, adminServer], clientPort, adminPort);
    tlsFiles?.stop();
    clearInterval(ticker);
    transport?.close();
    await closePeers();
    forwarder.close();
    metricsServer.close();
    await new Promise<void>((resolve, reject) => node.replica.close((err) => (err ? reject(err) : resolve())));
  };
  return { node, close };
}

/** What the readiness probe reads from the replica (readiness.ts). */
function replicaView(node: CellNode): ReplicaView {
  const s = node.replica.status();
  return {
    stopped: node.replica.stopped,
    leader: s.leader,
    isLeader: s.role === 'leader',
    term: s.term,
    commit: s.commit,
    applied: node.replica.applied,
    isMember: s.voters.includes(node.id) || s.learners.includes(node.id),
  };
}

/** How long the gRPC servers get to finish their calls on close before they are cut. */
const SERVER_CLOSE_GRACE_MS = 2_000;
/** How often a stopping leader looks whether leadership has moved. */
const TRANSFER_POLL_MS = 10;

/**
 * A stopping leader first hands leadership to its most up-to-date follower
 * (waiting at most --shutdown-transfer-ms), so the cell elects no one by
 * timeout and clients see one leader change, not an outage.
 */
async function handOffLeadership(node: CellNode, config: CellNodeConfig, logger: Logger): Promise<void> {
  if (!node.isLeader) return;
  const target = node.bestTransferTarget();
  if (!target) return;
  node.replica.transferLeadership(target);
  const untilMs = Date.now() + config.shutdownTransferMs;
  while (node.isLeader && Date.now() < untilMs) await new Promise((r) => setTimeout(r, TRANSFER_POLL_MS));
  logger.info({ to: target, moved: !node.isLeader }, 'leadership transfer before shutdown');
}

/** Lets calls in flight finish for a short grace, then cuts every server and the client port. */
async function stopServing(servers: readonly TolerantServer[], clientPort: MuxedPort, adminPort: GrpcTlsPort | undefined): Promise<void> {
  let graceTimer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all([...servers.map((s) => new Promise<void>((r) => s.tryShutdown(() => r()))), clientPort.close(), adminPort?.close()]),
    new Promise((r) => (graceTimer = setTimeout(r, SERVER_CLOSE_GRACE_MS))),
  ]);
  clearTimeout(graceTimer);
  for (const s of servers) s.forceShutdown();
  clientPort.destroy();
}

/**
 * The node's links to the other members, by --peer-transport. A member's peer address: --peer-dial's, else the member
 * directory's, else its client port + --peer-port-offset; a member added later gets its link when the directory
 * learns its address.
 */
function connectPeers(deps: CellNodeDeps, node: CellNode, tlsFiles: TlsFiles | undefined): RaftPeerTransport {
  const { config, logger, metrics } = deps;
  const options: PeerTransportOptions = {
    selfId: config.id,
    cellId: config.cellId,
    sendQueueMax: config.peerSendQueueMax,
    reconnectDelayMs: 100,
    logger,
    onUnreachable: (peer) => node.replica.reportUnreachable(peer),
    onConnectionLost: (peer) => node.replica.reportConnectionLost(peer),
    onQueueDepth: (peer, depth) => metrics.peerQueueDepth.set({ peer }, depth),
    onDropped: (peer, n) => metrics.peerDropped.inc({ peer }, n),
    // The peer address the cell lists for this node, else --peer-listen unless it is a wildcard no peer can dial.
    selfAddress: node.peerAddressOf(NodeId(config.id)) ?? (/^(0\.0\.0\.0|\[::\]):/.test(config.peerListen) ? undefined : config.peerListen),
    ...(tlsFiles ? { tls: tlsFiles } : {}),
  };
  const transport = config.peerTransport === 'tcp' ? new TcpPeerTransport(options) : new GrpcPeerTransport(options);
  const setPeer = (id: NodeId, address: string): void => {
    try {
      transport.setPeer(id, config.peerDial.get(id) ?? node.peerAddressOf(id) ?? address);
    } catch (err) {
      logger.error(
        { peer: id, address, err: (err as Error).message },
        'no peer address for this member: it gets no Raft messages from here',
      );
    }
  };
  for (const [id, address] of node.addresses) setPeer(id, address);
  node.cell.core.members.onAddress = setPeer;
  return transport;
}

/**
 * The peer port, by --peer-transport: Raft messages from the senders the node takes (@fencer/peer-transport
 * admitsSender: its members and the leader it follows) go to the replica; refusals are counted by reason. Returns how
 * to close it.
 */
async function servePeers(
  deps: CellNodeDeps,
  node: CellNode,
  transport: RaftPeerTransport,
  catchUp: CatchUpTracker,
  tlsFiles: TlsFiles | undefined,
): Promise<() => Promise<void>> {
  const { config, logger, metrics } = deps;
  const receive = (m: Parameters<typeof node.replica.receive>[0]): void => {
    catchUp.observe(m);
    node.replica.receive(m);
  };
  const known = (id: string): boolean => {
    const conf = node.replica.conf;
    return node.addresses.has(NodeId(id)) || conf.voters.includes(NodeId(id)) || conf.learners.includes(NodeId(id));
  };
  const peerChecks: PeerServerChecks = {
    admits: (id) => admitsSender(id, { isKnown: known, leader: node.replica.leader }),
    onRefused: (reason) => metrics.replica.inc('replica_messages_dropped_total', 1, { reason }),
    // A sender it took but cannot answer (it missed that member's addition): reach it where it says it is.
    onSenderAddress: (id, address) => {
      if (!transport.hasPeer(NodeId(id))) {
        logger.info({ peer: id, address }, 'learned the peer address of a member it had none for from its messages');
        transport.setPeer(NodeId(id), config.peerDial.get(NodeId(id)) ?? address);
      }
    },
    ...(tlsFiles ? { tls: tlsFiles } : {}),
  };
  if (config.peerTransport === 'tcp') {
    const peerServer = new TcpPeerServer(config.cellId, receive, logger, peerChecks);
    await peerServer.listen(config.peerListen);
    return () => peerServer.close();
  }
  // A TolerantServer for its compressed-garbage answer (INVALID_ARGUMENT); the service marks its own undecodable batches.
  const peerServer = new TolerantServer(grpcOptions(config));
  const { tls: _tls, tlsAccepts: _accepts, ...intakeChecks } = peerChecks;
  peerServer.addService(
    raftTransportService,
    raftTransportHandlers({ cellId: config.cellId, onMessage: receive, ...intakeChecks }, logger),
  );
  if (tlsFiles === undefined) {
    await bind(peerServer, config.peerListen);
    return () => new Promise<void>((r) => peerServer.tryShutdown(() => r()));
  }
  // The same refusals as the TCP port's: a failed handshake, or a certificate that names no replica of this cell.
  const port = await listenGrpcTls(peerServer, config.peerListen, {
    files: tlsFiles,
    accepts: replicaOfCell(config.cellId),
    onRefused: (reason, detail, remote) => {
      peerChecks.onRefused?.(reason);
      logger.warn({ remote, reason: detail }, 'refusing a peer connection');
    },
  });
  return async () => {
    await port.close();
    await new Promise<void>((r) => peerServer.tryShutdown(() => r()));
  };
}

/** This node's TLS files, watched for change and SIGHUP, when --tls-cert is given. */
function openTls(config: CellNodeConfig, logger: Logger): TlsFiles | undefined {
  if (config.tls === undefined) return undefined;
  const files = new TlsFiles(config.tls, (err) => logger.error({ err: err.message }, 'TLS files not reloaded; keeping the previous ones'));
  files.onReload(() => logger.info({ cert: config.tls?.cert }, 'TLS files reloaded'));
  return files.start();
}

/**
 * The client port (gRPC and the lane, sniffed, or chosen by ALPN under TLS) and the admin port (under TLS: a control
 * plane's or an operator's certificate only).
 */
async function serveClientsAndAdmin(
  deps: CellNodeDeps,
  server: TolerantServer,
  adminServer: TolerantServer,
  service: LockServiceImpl,
  tlsFiles: TlsFiles | undefined,
): Promise<{ clientPort: MuxedPort; adminPort: GrpcTlsPort | undefined }> {
  const { config, logger } = deps;
  const refused = (port: string) => (reason: string, detail: string, remote: string) =>
    logger.warn({ port, remote, reason, detail }, 'refusing a TLS connection');
  // gRPC and the routers' lane share the client port (@fencer/peer-transport listenMuxed).
  const clientPort = await listenMuxed(server, config.listen, {
    dispatch: service.lane,
    onProtocolError: (reason) => logger.warn({ reason }, 'a lane connection broke the framing; closed'),
    ...(tlsFiles
      ? {
          tls: {
            files: tlsFiles,
            accepts: kindsOf('replica', 'router', 'proxy', 'control-plane', 'operator'),
            onRefused: refused('client'),
          },
        }
      : {}),
  });
  if (tlsFiles === undefined) {
    await bind(adminServer, config.adminListen);
    return { clientPort, adminPort: undefined };
  }
  const adminPort = await listenGrpcTls(adminServer, config.adminListen, {
    files: tlsFiles,
    accepts: kindsOf('control-plane', 'operator'),
    onRefused: refused('admin'),
  });
  return { clientPort, adminPort };
}

#!/usr/bin/env node
/**
 * One control-plane process: parses its flags, opens the meta group's WAL,
 * joins the meta group over the TCP peer transport, follows the cells, and
 * serves the HTTP API and Prometheus metrics. SIGTERM stops it cleanly; a
 * storage error (fsync) exits non-zero at once and is never retried.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CommanderError } from 'commander';
import { pino } from 'pino';
import { type Clock, SeededRandom } from '@fencer/base';
import { openRaftLogStore, type WalStore } from '@fencer/wal';
import { NodeDisk } from '@fencer/wal/node';
import { TcpPeerServer, TcpPeerTransport } from '@fencer/peer-transport';
import { noopCellMetrics } from '@fencer/cell';
import { MetaGroup } from '@fencer/meta-fsm/group';
import { buildApp } from './app.js';
import { GrpcCellDirectory } from './cells.js';
import { parseConfig, type ControlPlaneConfig } from './config.js';
import { ControlPlaneMetrics } from './metrics.js';
import { loadOrCreateAdminToken } from './auth.js';
import { metaPeerChecks } from './peer-intake.js';

/** The peer transport checks every batch's group id: the meta group's is this, never a cell's. */
const META_GROUP_ID = 'fencer-meta';

const logger = pino(
  { name: 'control-plane', level: process.env['FENCER_LOG_LEVEL'] ?? 'info', base: { pid: process.pid } },
  pino.destination({ dest: 2, sync: true }),
);

function die(message: string, err?: unknown): never {
  logger.fatal({ err: err instanceof Error ? err.stack : err }, message);
  process.exit(1);
}
process.on('uncaughtException', (err) => die('uncaught exception (a bug): exiting', err));
process.on('unhandledRejection', (err) => die('unhandled rejection (a bug): exiting', err));

let config: ControlPlaneConfig;
try {
  config = parseConfig(process.argv.slice(2));
} catch (err) {
  if (err instanceof CommanderError && (err.code === 'commander.helpDisplayed' || err.code === 'commander.version')) process.exit(0);
  process.stderr.write(`fencer-control-plane: ${(err as Error).message}\n`);
  process.exit(2);
}

const clock: Clock = { monoMs: () => performance.now(), wallMs: () => Date.now() };
const metrics = new ControlPlaneMetrics();
const adminToken = config.auth ? loadOrCreateAdminToken(config.adminTokenFile) : undefined;

const store: WalStore = await new Promise((resolve) =>
  openRaftLogStore(new NodeDisk(), config.dataDir, {}, (err, s) => {
    if (err || !s) die(`cannot open the meta group's log in ${config.dataDir}`, err);
    resolve(s);
  }),
);
if (store.recovery.truncatedAt) logger.warn({ truncatedAt: store.recovery.truncatedAt }, 'recovery cut a torn tail off the log');

// The transport reports unreachable peers to the group, which sends through the transport: the group is
// built right after, before any peer is set, so the callback never runs before it exists.
const transport = new TcpPeerTransport({
  selfId: config.id,
  cellId: META_GROUP_ID,
  sendQueueMax: 4096,
  reconnectDelayMs: 100,
  logger,
  onUnreachable: (peer) => group.replica.reportUnreachable(peer),
});
const group = new MetaGroup(
  {
    id: config.id,
    peers: new Map([...config.peers.keys()].map((id) => [id, config.urls.get(id)!])),
    raft: { electionTicks: config.electionTicks },
    snapshotEveryEntries: config.snapshotEveryEntries,
  },
  store,
  {
    clock,
    random: new SeededRandom(randomBytes(6).readUIntBE(0, 6)),
    send: (messages) => transport.send(messages),
    logger,
    metrics: { ...noopCellMetrics, replica: metrics.replica },
    onFatal: (err) => die('storage failure (fsync is never retried): exiting', err),
    after: (ms, run) => {
      const timer = setTimeout(run, ms);
      return () => clearTimeout(timer);
    },
  },
);
for (const [id, address] of config.peers) if (id !== config.id) transport.setPeer(id, address);
// The peer port takes Raft messages only from the meta group's members and the leader it follows (peer-intake.ts).
const peerChecks = metaPeerChecks(group, config.peers, (reason) => metrics.peerRefused(reason));
const peerServer = new TcpPeerServer(META_GROUP_ID, (m) => group.receive(m), logger, peerChecks);
metrics.watchTerm(() => group.replica.status().term);
await peerServer.listen(config.peerListen).catch((err: unknown) => die(`cannot listen for peers on ${config.peerListen}`, err));

const cells = new GrpcCellDirectory(config.cells, () => performance.now(), config.cellPollMs);
const app = await buildApp({
  meta: group,
  cells,
  logger: logger.child({ part: 'http' }),
  metrics,
  ...(adminToken !== undefined ? { adminToken } : {}),
});
const at = config.listen.lastIndexOf(':');
await app
  .listen({ host: config.listen.slice(0, at), port: Number(config.listen.slice(at + 1)) })
  .catch((err: unknown) => die(`cannot listen on ${config.listen}`, err));
const metricsServer = await metrics
  .serve(config.metricsListen)
  .catch((err: unknown) => die(`cannot serve metrics on ${config.metricsListen}`, err));

const ticker = setInterval(() => {
  group.tick();
  metrics.isLeader.set(group.isLeader ? 1 : 0);
  metrics.routingVersion.set(group.state.routingVersion);
  metrics.tenants.set(group.state.tenants().length);
}, config.tickMs);
logger.info(
  {
    id: config.id,
    listen: config.listen,
    peerListen: config.peerListen,
    peers: Object.fromEntries(config.peers),
    cells: config.cells.map((c) => c.id),
    auth: config.auth,
  },
  'control plane serving',
);

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down');
  await app.close();
  clearInterval(ticker);
  cells.close();
  transport.close();
  await peerServer.close();
  metricsServer.close();
  await new Promise<void>((resolve) => group.close((err) => (err ? die('closing the log failed', err) : resolve())));
  logger.info({}, 'stopped cleanly');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

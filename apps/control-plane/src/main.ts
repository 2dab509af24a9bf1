#!/usr/bin/env node
/**
 * One control-plane process: parses its flags, joins the meta group
 * (meta-member.ts: its log, the group, the TCP peer transport), follows the
 * cells, and serves the HTTP API and Prometheus metrics. SIGTERM stops it
 * cleanly; a storage error (fsync) exits non-zero at once and is never
 * retried.
 */
import { performance } from 'node:perf_hooks';
import type { Clock } from '@fencer/base';
import { TlsFiles, createLogger, exitOnBug, exitOnConfigError, serveMetrics, stopOnSignals } from '@fencer/service';
import { anyReplica, grpcChannelCredentials } from '@fencer/peer-transport';
import { buildApp } from './app.js';
import { GrpcCellDirectory } from './cells.js';
import { parseConfig, type ControlPlaneConfig } from './config.js';
import { ControlPlaneMetrics } from './metrics.js';
import path from 'node:path';
import { loadOrCreateAdminToken, loadOrCreateFrontEndToken } from './auth.js';
import { startMetaMember } from './meta-member.js';
import { LeaderLoop } from './workers/leader-loop.js';
import { startSnapshotTask } from './workers/snapshot-wiring.js';
import { moveWorker } from './workers/move-worker.js';
import { ownershipReconciler } from './workers/ownership.js';

const NAME = 'fencer-control-plane';
const logger = createLogger('control-plane', { sync: true });
const die = exitOnBug(logger, NAME);

let config: ControlPlaneConfig;
try {
  config = parseConfig(process.argv.slice(2));
} catch (err) {
  exitOnConfigError(NAME, err);
}

const clock: Clock = { monoMs: () => performance.now(), wallMs: () => Date.now() };
const metrics = new ControlPlaneMetrics();
const adminToken = config.auth ? loadOrCreateAdminToken(config.adminTokenFile) : undefined;
// Routers and proxies get this narrower token (routing, fleet status, auto-tenants), written beside the admin token.
const frontEndToken = config.auth
  ? loadOrCreateFrontEndToken(path.join(path.dirname(config.adminTokenFile), 'front-end-token'))
  : undefined;
const tlsFiles = config.tls
  ? new TlsFiles(config.tls, (err) => logger.error({ err: err.message }, 'TLS files not reloaded; keeping the previous ones')).start()
  : undefined;
// Under TLS the cells' admin ports take this instance's certificate (a control plane's): no other caller may write there.
const cellCredentials = tlsFiles ? grpcChannelCredentials(tlsFiles, anyReplica) : undefined;
const member = await startMetaMember(config, { logger, metrics, clock, die }, tlsFiles);
const group = member.group;

const cells = new GrpcCellDirectory(config.cells, () => performance.now(), config.cellPollMs, cellCredentials);
metrics.watchCells(() => cells.status());
const snapshots = startSnapshotTask(config, {
  meta: group,
  cells,
  logger: logger.child({ part: 'snapshots' }),
  metrics: metrics.snapshots,
  ...(cellCredentials ? { cellCredentials } : {}),
});
const taskLogger = logger.child({ part: 'leader-tasks' });
const leaderTasks = new LeaderLoop(
  group,
  [
    moveWorker({
      meta: group,
      term: () => group.replica.status().term,
      cells,
      logger: taskLogger,
      wallMs: () => Date.now(),
      metrics: metrics.moves,
      stepPauseMs: config.moveStepPauseMs,
    }),
    ownershipReconciler({
      meta: group,
      cells,
      logger: taskLogger,
      claimed: (cell) => metrics.ownershipClaimed(cell),
      quotasSent: (cell) => metrics.ownershipQuotasSent(cell),
      credentialsSent: (cell) => metrics.ownershipCredentialsSent(cell),
    }),
    snapshots.task,
  ],
  taskLogger,
  metrics.leaderLoop,
);
const app = await buildApp({
  meta: group,
  cells,
  logger: logger.child({ part: 'http' }),
  metrics,
  ...(adminToken !== undefined ? { adminToken } : {}),
  ...(frontEndToken !== undefined ? { frontEndToken } : {}),
  wake: (task) => leaderTasks.wake(task),
  followerReads: config.followerReads,
  instanceId: config.id,
  ...(tlsFiles ? { https: tlsFiles } : {}),
});
const at = config.listen.lastIndexOf(':');
await app
  .listen({ host: config.listen.slice(0, at), port: Number(config.listen.slice(at + 1)) })
  .catch((err: unknown) => die(`cannot listen on ${config.listen}`, err));
const metricsServer = await serveMetrics(config.metricsListen, metrics.registry).catch((err: unknown) =>
  die(`cannot serve metrics on ${config.metricsListen}`, err),
);

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
    tls: config.tls !== undefined,
    snapshotStore: config.snapshotStore,
  },
  'control plane serving',
);

stopOnSignals(logger, async (signal) => {
  logger.info({ signal }, 'shutting down');
  await app.close();
  leaderTasks.close();
  snapshots.close();
  clearInterval(ticker);
  cells.close();
  metricsServer.close();
  await member.close();
  tlsFiles?.stop();
  logger.info({}, 'stopped cleanly');
});

#!/usr/bin/env node
/**
 * The cell-node process: parses its configuration, builds the node
 * (build.ts) and runs it. On SIGTERM a leader hands leadership to the most
 * up-to-date follower first; then the node stops serving, flushes and exits
 * 0. A storage error (fsync) exits non-zero at once: it is never retried.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { type Clock, SeededRandom } from '@fencer/base';
import { createLogger, exitOnBug, exitOnConfigError, stopOnSignals } from '@fencer/service';
import { parseConfig, type CellNodeConfig } from './config.js';
import { NodeMetrics } from './metrics.js';
import { buildCellNode } from './build.js';

const NAME = 'fencer-cell-node';
const logger = createLogger('cell-node');
const die = exitOnBug(logger, NAME);

let config: CellNodeConfig;
try {
  config = parseConfig(process.argv.slice(2));
} catch (err) {
  exitOnConfigError(NAME, err);
}

logger.info({ config: { ...config, peers: Object.fromEntries(config.peers) } }, 'starting with this configuration');
const clock: Clock = { monoMs: () => performance.now(), wallMs: () => Date.now() };
const app = await buildCellNode({
  config,
  clock,
  random: new SeededRandom(randomBytes(6).readUIntBE(0, 6)),
  logger,
  metrics: new NodeMetrics(),
  onFatal: (err) => die('storage failure (fsync is never retried): exiting', err),
  nowMs: () => performance.now(),
}).catch((err: unknown) => die('cannot start', err));

stopOnSignals(logger, async (signal) => {
  logger.info({ signal }, 'shutting down');
  await app.close().catch((err: unknown) => die('closing the log failed', err));
  logger.info({}, 'stopped cleanly');
});

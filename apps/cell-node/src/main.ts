#!/usr/bin/env node
/**
 * The cell-node process: parses its configuration, builds the node
 * (build.ts) and runs it. On SIGTERM a leader hands leadership to the most
 * up-to-date follower first; then the node stops serving, flushes and exits
 * 0. A storage error (fsync) exits non-zero at once: it is never retried.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { CommanderError } from 'commander';
import { type Clock, SeededRandom } from '@fencer/base';
import { parseConfig, type CellNodeConfig } from './config.js';
import { createLogger } from './logger.js';
import { NodeMetrics } from './metrics.js';
import { buildCellNode } from './build.js';

const logger = createLogger('cell-node');

/**
 * Writes `text` to `fd` before returning, even when fd is a non-blocking pipe
 * or socket whose buffer is full (EAGAIN): process.stderr.write would queue it
 * and process.exit would drop it. Gives up after a second of a stalled reader.
 */
function writeBeforeExit(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const giveUpAt = performance.now() + 1000;
  for (let off = 0; off < bytes.length;) {
    try {
      off += fs.writeSync(fd, bytes, off);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || performance.now() > giveUpAt) return;
      Atomics.wait(nap, 0, 0, 2);
    }
  }
}

function die(message: string, err?: unknown): never {
  logger.fatal({ err: err instanceof Error ? err.stack : err }, message);
  // The log line above may still sit in pino's async buffer: say it synchronously too.
  writeBeforeExit(2, `fencer-cell-node: ${message}${err instanceof Error ? `: ${err.message}` : ''}\n`);
  process.exit(1);
}

process.on('uncaughtException', (err) => die('uncaught exception (a bug): exiting', err));
process.on('unhandledRejection', (err) => die('unhandled rejection (a bug): exiting', err));

let config: CellNodeConfig;
try {
  config = parseConfig(process.argv.slice(2));
} catch (err) {
  if (err instanceof CommanderError && (err.code === 'commander.helpDisplayed' || err.code === 'commander.version')) process.exit(0);
  process.stderr.write(`fencer-cell-node: ${(err as Error).message}\n`);
  process.exit(2);
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

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down');
  await app.close().catch((err: unknown) => die('closing the log failed', err));
  logger.info({}, 'stopped cleanly');
  logger.flush?.();
  setTimeout(() => process.exit(0), 50);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

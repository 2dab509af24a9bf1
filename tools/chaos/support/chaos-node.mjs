#!/usr/bin/env node
/**
 * The chaos harness's own cell-node entry point: the same buildCellNode
 * as apps/cell-node's main.ts, plus libs/cell's planted bugs named by
 * FENCER_CHAOS_BUG. Only ChaosCell starts it, and only when a run asks for a
 * bug; the production main.ts has no way to set test hooks. Plain .mjs over
 * cell-node's public entry (its compiled build), as tools/fleet is: it is
 * never part of a production build.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SeededRandom } from '@fencer/base';
import { NodeMetrics, buildCellNode, parseConfig } from '@fencer/cell-node';
import { createReplica } from '@fencer/replica/testing';
import { createLogger } from '@fencer/service';

/** Each bug a run may plant, as libs/cell's LockCellTestHooks (a Raft core's bug through the replica it builds). */
export const CHAOS_BUGS = {
  // A follower whose connection to its leader resets starts a real election at once (term + 1), no pre-vote.
  campaignWithoutPreVoteOnConnectionLoss: {
    makeReplica: (config, store, machine, env) =>
      createReplica({ ...config, bugs: { ...config.bugs, campaignWithoutPreVoteOnConnectionLoss: true } }, store, machine, env),
  },
  readWithoutBarrier: { readWithoutBarrier: true },
  heartbeatWithoutConfirmation: { heartbeatWithoutConfirmation: true },
  grantBeforeCommit: { grantBeforeCommit: true },
  importWithoutRevisionRaise: { importWithoutRevisionRaise: true },
};

const bug = process.env.FENCER_CHAOS_BUG ?? '';
const testHooks = CHAOS_BUGS[bug];
const logger = createLogger('chaos-node');
function die(message, err) {
  process.stderr.write(`fencer-chaos-node: ${message}${err instanceof Error ? `: ${err.stack}` : ''}\n`);
  process.exit(1);
}
if (!testHooks) die(`FENCER_CHAOS_BUG must name one of ${Object.keys(CHAOS_BUGS).join(', ')} (got "${bug}")`);
process.on('uncaughtException', (err) => die('uncaught exception (a bug): exiting', err));
process.on('unhandledRejection', (err) => die('unhandled rejection (a bug): exiting', err));

const config = parseConfig(process.argv.slice(2));
logger.warn({ bug }, 'chaos node with a planted bug');
const app = await buildCellNode({
  config,
  clock: { monoMs: () => performance.now(), wallMs: () => Date.now() },
  random: new SeededRandom(randomBytes(6).readUIntBE(0, 6)),
  logger,
  metrics: new NodeMetrics(),
  onFatal: (err) => die('storage failure (fsync is never retried): exiting', err),
  nowMs: () => performance.now(),
  testHooks,
}).catch((err) => die('cannot start', err));

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  await app.close().catch((err) => die('closing the log failed', err));
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());

/**
 * Reads a follower serves itself (docs/decisions/0024-idle-fleets-and-follower-reads.md):
 * the routing table, its long poll and the fleet, which every router and
 * proxy asks for. Forwarded, they all ended on the meta leader; served here,
 * the leader only confirms an index.
 *
 * The follower asks its leader's `GET /v1/internal/read-index`, where the
 * leader runs a ReadIndex round (it still leads, and has applied everything
 * committed before the round began) and answers the index it has applied.
 * The follower then waits until it has applied that index itself and
 * serves from its own state: it sees every write that completed before the
 * read arrived, as a read on the leader would (Raft dissertation §6.4,
 * reads on followers). Reads arriving together share one round, as the
 * leader's own ReadIndex rounds do (@fencer/group ReadIndexRounds).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ReadIndexRounds } from '@fencer/group';
import { forwardTimeoutMs } from '../limits.js';
import type { MetaStore } from '../meta-group.js';
import { ProblemError } from '../problems.js';
import { routeConfig } from './route-config.js';

/**
 * The leader's route that answers a follower's read barrier, for the
 * routing and fleet reads here and for the dashboard's stream
 * (dashboard/read-anywhere.ts): the one home of the read index. Not part
 * of the contract: members call it among themselves, with the admin token.
 */
export const READ_INDEX_PATH = '/v1/internal/read-index';
/** Follower reads waiting for the next round through the leader; beyond it, the read is forwarded instead. */
const FOLLOWER_READS_WAITING_MAX = 10_000;

/** Requests that passed a follower's read barrier: their handler serves from the state applied here. */
const passed = new WeakSet<FastifyRequest>();

/** The state a read handler may serve: the one applied here after a follower's barrier, else after a ReadIndex round here. */
export function readState(meta: MetaStore, request: FastifyRequest): ReturnType<MetaStore['read']> {
  return passed.has(request) ? Promise.resolve(meta.state) : meta.read();
}

/** The leader's side: a ReadIndex round, then the index applied here (every member's apply reaches it). */
export function installReadIndexRoute(app: FastifyInstance, meta: MetaStore): void {
  app.get(READ_INDEX_PATH, { config: routeConfig('admin', true) }, async () => {
    if (!meta.isLeader) throw new ProblemError('NOT_LEADER', 'only the meta leader confirms a read index');
    await meta.read();
    return { index: meta.appliedIndex };
  });
}

export interface FollowerReads {
  /** Resolves once the state here may serve a linearizable read; rejects when the leader cannot confirm one (forward instead). */
  barrier(request: FastifyRequest): Promise<void>;
}

export function followerReads(meta: MetaStore, adminToken: string | undefined): FollowerReads {
  let roundIndex = 0;
  const rounds = new ReadIndexRounds((done) => {
    leaderIndex(meta, adminToken).then(
      (index) => {
        roundIndex = index;
        done(null);
      },
      (e: Error) => done(e),
    );
  }, FOLLOWER_READS_WAITING_MAX);
  const confirmed = (): Promise<number> =>
    new Promise((resolve, reject) => {
      // `done` runs as the round ends, before another begins: roundIndex is this round's.
      const queued = rounds.confirm((error) => (error ? reject(error) : resolve(roundIndex)));
      if (!queued) reject(new ProblemError('NOT_LEADER', 'too many follower reads waiting'));
    });
  return {
    async barrier(request) {
      const index = await confirmed();
      await appliedHere(meta, index);
      passed.add(request);
    },
  };
}

/** The leader's read index, asked by a follower (READ_INDEX_PATH); NOT_LEADER when no leader confirms one within `timeoutMs`. */
export async function leaderIndex(meta: MetaStore, adminToken: string | undefined, timeoutMs = forwardTimeoutMs): Promise<number> {
  const url = meta.leader === null ? undefined : meta.leaderAddress();
  if (url === undefined) throw new ProblemError('NOT_LEADER', 'no known meta leader to confirm a read');
  const res = await fetch(`${url}${READ_INDEX_PATH}`, {
    headers: adminToken ? { authorization: `Bearer ${adminToken}` } : {},
    signal: AbortSignal.timeout(timeoutMs),
  }).catch((e: Error) => {
    throw new ProblemError('NOT_LEADER', `the leader did not confirm a read (${e.message}); retry`);
  });
  const body = (await res.json().catch(() => ({}))) as { index?: unknown };
  if (!res.ok || typeof body.index !== 'number')
    throw new ProblemError('NOT_LEADER', `the leader did not confirm a read (HTTP ${res.status})`);
  return body.index;
}

/** Resolves once this instance has applied `index`; NOT_LEADER when it has not within `timeoutMs`. */
export function appliedHere(meta: MetaStore, index: number, timeoutMs = forwardTimeoutMs): Promise<void> {
  return new Promise((resolve, reject) => {
    meta.waitApplied(index, timeoutMs, (reached) =>
      reached ? resolve() : reject(new ProblemError('NOT_LEADER', `index ${index} was not applied here in time`)),
    );
  });
}

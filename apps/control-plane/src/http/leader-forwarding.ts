/**
 * A follower of the meta group forwards every request of the API to the
 * leader's URL and relays its answer, except the routes it serves itself
 * (health, the contract) and the reads it serves after a barrier through
 * the leader (routing, fleet: follower-reads.ts; forwarded when the barrier
 * fails). A request that was forwarded once is never forwarded again: a
 * follower that receives one, or that knows no leader, answers NOT_LEADER
 * and the client retries.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { NodeId } from '@fencer/base';
import { forwardTimeoutMs, routingWaitMsMax } from '../limits.js';
import type { MetaStore } from '../meta-group.js';
import { ProblemError } from '../problems.js';
import type { FollowerReads } from './follower-reads.js';
import { routeConfigOf } from './route-config.js';

const FORWARDED_HEADER = 'x-fencer-forwarded';
/** The request headers the leader needs: credentials, the body's type, and the key that makes a retried write safe. */
const RELAYED_HEADERS = ['authorization', 'content-type', 'idempotency-key'] as const;

/** Installs the forwarding hook on the root instance. It must run before the access hook: the leader authorizes. */
/** `reads` absent: a follower forwards the follower reads too (`--no-follower-reads`). */
export function installLeaderForwarding(app: FastifyInstance, meta: MetaStore, reads?: FollowerReads): void {
  app.addHook('preValidation', async (request, reply) => {
    const config = routeConfigOf(request);
    if (config === undefined || config.local || meta.isLeader) return undefined;
    if (reads && config.followerRead && request.headers[FORWARDED_HEADER] === undefined) {
      try {
        await reads.barrier(request);
        return undefined;
      } catch {
        // No confirmed index (no leader, or it did not answer in time): forwarding answers, or says NOT_LEADER.
      }
    }
    await forwardToLeader(meta, request, reply);
    return reply;
  });
}

/** The leader and its URL, or a NOT_LEADER problem when there is none to forward to (or this request came forwarded already). */
function leaderFor(meta: MetaStore, request: FastifyRequest): { leader: NodeId; url: string } {
  const leader = meta.leader;
  const url = leader === null ? undefined : meta.leaderAddress();
  if (request.headers[FORWARDED_HEADER] === undefined && leader !== null && url !== undefined) return { leader, url };
  throw new ProblemError(
    'NOT_LEADER',
    leader === null ? 'the meta group has no leader right now; retry' : `the leader ${leader} has no known URL; retry`,
  );
}

/** A long poll may keep the leader busy for its waitMs: the forwarded call waits that much longer. */
function forwardTimeoutFor(request: FastifyRequest): number {
  const waitMs = Number((request.query as { waitMs?: unknown } | undefined)?.waitMs ?? 0);
  return forwardTimeoutMs + (Number.isFinite(waitMs) ? Math.min(waitMs, routingWaitMsMax) : 0);
}

async function forwardToLeader(meta: MetaStore, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { leader, url } = leaderFor(meta, request);
  const headers: Record<string, string> = { [FORWARDED_HEADER]: '1' };
  for (const h of RELAYED_HEADERS) {
    const v = request.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  let res: Response;
  try {
    res = await fetch(`${url}${request.url}`, {
      method: request.method,
      headers,
      ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
      signal: AbortSignal.timeout(forwardTimeoutFor(request)),
    });
  } catch (e) {
    throw new ProblemError(
      'NOT_LEADER',
      `the leader ${leader} did not answer (${(e as Error).message}); retry with the same Idempotency-Key`,
    );
  }
  const text = await res.text();
  reply.code(res.status);
  const type = res.headers.get('content-type');
  if (type) reply.header('content-type', type);
  await reply.send(text);
}

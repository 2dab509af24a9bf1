/**
 * `fencer cell add-member | remove-member | promote | transfer-leader |
 * snapshot`: the membership and maintenance operations of the admin API, as
 * `etcdctl member add/remove/promote`, `move-leader` and `snapshot` are for
 * etcd. Each finds the leader among the admin endpoints (the reachable
 * replica that says it leads, in the highest term), sends it the request,
 * and, if leadership moved meanwhile (NOT_LEADER, NO_LEADER), looks again
 * until --timeout.
 */
import { type ChannelCredentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { adminpb, fromServiceError } from '@fencer/protocol';
import type { CliIo } from '../io.js';
import { EXIT } from '../exit-codes.js';

export interface AdminReplica {
  readonly id: string;
  readonly admin: string;
}

interface Ctx {
  readonly replicas: readonly AdminReplica[];
  /** TLS with an operator's certificate on a `--secure` fleet (run-context.ts adminCredentialsOf), else plaintext. */
  readonly credentials: ChannelCredentials;
  readonly timeoutMs: number;
  readonly json: boolean;
  readonly io: CliIo;
}

const retryPauseMs = 200;
/** How long one Status call may take when looking over the replicas. */
export const statusTimeoutMs = 3_000;

/** One admin call to one replica; a refusal arrives as a FencerError. A cell of a `--secure` fleet takes an operator's certificate only. */
export function adminCall<Res>(
  address: string,
  method: string,
  request: unknown,
  deadlineMs: number,
  creds: ChannelCredentials,
): Promise<Res> {
  const client = new adminpb.CellAdminClient(address, creds) as unknown as Record<string, (...args: unknown[]) => unknown> & {
    close(): void;
  };
  return new Promise((resolve, reject) =>
    client[method]!.call(client, request, new Metadata(), { deadline: Date.now() + deadlineMs }, (err: ServiceError | null, res: Res) => {
      client.close();
      if (err) reject(fromServiceError(err));
      else resolve(res);
    }),
  );
}

/** Every reachable replica's status, with the admin address it came from. */
async function statuses(ctx: Ctx): Promise<{ replica: AdminReplica; status: adminpb.StatusResponse }[]> {
  const answers = await Promise.all(
    ctx.replicas.map((r) =>
      adminCall<adminpb.StatusResponse>(r.admin, 'status', {}, Math.min(ctx.timeoutMs, statusTimeoutMs), ctx.credentials).then(
        (s) => ({ replica: r, status: s }),
        () => undefined,
      ),
    ),
  );
  return answers.filter((a) => a !== undefined);
}

/** The answer, among replicas' statuses, of the one that says it leads in the highest term. */
export function leaderAmong<T extends { status?: adminpb.StatusResponse }>(answers: readonly T[]): T | undefined {
  return answers.filter((a) => a.status?.role === 'leader').sort((a, b) => b.status!.term - a.status!.term)[0];
}

async function findLeader(ctx: Ctx): Promise<{ replica: AdminReplica; status: adminpb.StatusResponse } | undefined> {
  return leaderAmong(await statuses(ctx));
}

/** Sends `method` to the leader, looking for it again while leadership moves, until the timeout. */
async function onLeader<Res>(ctx: Ctx, method: string, request: unknown): Promise<{ leader: string; response: Res }> {
  const until = Date.now() + ctx.timeoutMs;
  for (;;) {
    const leader = await findLeader(ctx);
    try {
      if (leader === undefined)
        throw new FencerError('NO_LEADER', `no replica among ${ctx.replicas.map((r) => r.admin).join(', ')} says it leads`);
      const response = await adminCall<Res>(leader.replica.admin, method, request, Math.max(1_000, until - Date.now()), ctx.credentials);
      return { leader: leader.status.nodeId, response };
    } catch (e) {
      const code = e instanceof FencerError ? e.code : '';
      if ((code !== 'NOT_LEADER' && code !== 'NO_LEADER' && code !== 'SHUTTING_DOWN') || Date.now() + retryPauseMs > until) throw e;
      await new Promise((r) => setTimeout(r, retryPauseMs));
    }
  }
}

function report(ctx: Ctx, json: Record<string, unknown>, text: string): number {
  ctx.io.stdout(ctx.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
  return EXIT.OK;
}

export async function addMember(ctx: Ctx, id: string, address: string, o: { learner?: boolean; peerAddress?: string }): Promise<number> {
  const request: adminpb.AddMemberRequest = { id, address, learner: o.learner === true, peerAddress: o.peerAddress ?? '' };
  const { leader, response } = await onLeader<adminpb.AddMemberResponse>(ctx, 'addMember', request);
  return report(
    ctx,
    { member: id, address, learner: request.learner, peerAddress: o.peerAddress ?? null, index: response.index, leaderId: leader },
    `added ${id} at ${address} as ${request.learner ? 'a learner' : 'a voter'} (membership change at index ${response.index}, by ${leader})`,
  );
}

export async function removeMember(ctx: Ctx, id: string): Promise<number> {
  const { leader, response } = await onLeader<adminpb.RemoveMemberResponse>(ctx, 'removeMember', { id });
  return report(
    ctx,
    { member: id, index: response.index, leaderId: leader },
    `removed ${id} (membership change at index ${response.index}, by ${leader})`,
  );
}

export async function promoteLearner(ctx: Ctx, id: string): Promise<number> {
  const { leader, response } = await onLeader<adminpb.PromoteLearnerResponse>(ctx, 'promoteLearner', { id });
  return report(
    ctx,
    { member: id, index: response.index, leaderId: leader },
    `promoted ${id} to voter (membership change at index ${response.index}, by ${leader})`,
  );
}

export async function transferLeader(ctx: Ctx, to: string | undefined): Promise<number> {
  const { leader, response } = await onLeader<adminpb.TransferLeadershipResponse>(ctx, 'transferLeadership', { to: to ?? '' });
  return report(ctx, { from: leader, leaderId: response.leaderId }, `leadership moved from ${leader} to ${response.leaderId}`);
}

/** Snapshot on one replica (by id), or on the leader. */
export async function takeSnapshot(ctx: Ctx, replicaId: string | undefined): Promise<number> {
  let target: AdminReplica | undefined;
  let name = replicaId;
  if (replicaId === undefined) {
    const leader = await findLeader(ctx);
    target = leader?.replica;
    name = leader?.status.nodeId;
  } else {
    const all = await statuses(ctx);
    target = all.find((a) => a.status.nodeId === replicaId)?.replica ?? ctx.replicas.find((r) => r.id === replicaId);
    if (target === undefined)
      throw new FencerError(
        'INVALID_ARGUMENT',
        `no replica ${replicaId} among the admin endpoints (${ctx.replicas.map((r) => r.id).join(', ')})`,
      );
  }
  if (target === undefined) throw new FencerError('NO_LEADER', 'no leader reachable; name a replica with --replica');
  const r = await adminCall<adminpb.TakeSnapshotResponse>(target.admin, 'takeSnapshot', {}, ctx.timeoutMs, ctx.credentials);
  return report(
    ctx,
    { replica: name ?? target.id, index: r.index, bytes: r.bytes },
    `snapshot of ${name ?? target.id} at index ${r.index} (${r.bytes} bytes)`,
  );
}

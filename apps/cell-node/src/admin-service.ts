/**
 * The admin API of one node: status, leadership transfer, membership
 * changes (one server at a time), snapshot now, and a snapshot's bytes
 * (read-snapshot.ts). Membership calls go to the
 * leader; elsewhere they answer NOT_LEADER with a leader-hint.
 */
import { type sendUnaryData, type ServerUnaryCall, type ServiceError } from '@grpc/grpc-js';
import { ConfChangeType } from '@fencer/raft';
import { FencerError, Namespace, NodeId } from '@fencer/base';
import { adminpb, toServiceError } from '@fencer/protocol';
import {
  type Command,
  type Outcome,
  type SetMemberAddressCommand,
  type SetNamespaceCredentialsCommand,
  type SetNamespaceQuotasCommand,
  validateCommand,
} from '@fencer/lock-fsm';
import type { CellNode } from './node.js';
import { readSnapshotHandler } from './read-snapshot.js';
import { fenceOf, MoveAdmin } from './move-admin.js';

function handle<Req, Res>(node: CellNode, fn: (req: Req) => Promise<Res>) {
  return (call: ServerUnaryCall<Req, Res>, cb: sendUnaryData<Res>): void => {
    fn(call.request).then(
      (res) => cb(null, res),
      (e: unknown) => {
        const fe = e instanceof FencerError ? e : new FencerError('INTERNAL', (e as Error)?.message ?? String(e));
        if (!(e instanceof FencerError)) node.env.logger.error({ err: (e as Error)?.stack }, 'admin call failed');
        cb(toServiceError(fe) as ServiceError);
      },
    );
  };
}

function requireLeader(node: CellNode): void {
  if (!node.isLeader) throw new FencerError('NOT_LEADER', 'membership and transfer calls go to the leader', node.leaderAddress());
}

/** Resolves once `predicate` holds, checking every tick-ish interval, or rejects after timeoutMs. */
function until(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const timer = setInterval(() => {
      if (predicate()) {
        clearInterval(timer);
        resolve();
      } else if (Date.now() - started > timeoutMs) {
        clearInterval(timer);
        reject(new FencerError('DEADLINE_EXCEEDED', `${what} did not happen within ${timeoutMs} ms`));
      }
    }, 20);
  });
}

export function statusOf(node: CellNode): adminpb.StatusResponse {
  const st = node.replica.status();
  const leaderId = st.leader ?? '';
  const members: adminpb.MemberStatus[] = [];
  for (const id of [...st.voters, ...st.learners]) {
    const p = st.progress?.[id];
    members.push({
      id,
      address: node.addresses.get(id) ?? '',
      peerAddress: node.peerAddressOf(id) ?? '',
      voter: st.voters.includes(id),
      matchIndex: id === node.id && node.isLeader ? st.lastIndex : (p?.match ?? 0),
      lag: p ? Math.max(0, st.lastIndex - p.match) : 0,
      state: id === node.id ? 'self' : (p?.state ?? ''),
    });
  }
  const stats = node.fsmStats();
  return {
    cellId: node.config.cellId,
    nodeId: node.id,
    role: st.role,
    term: st.term,
    leaderId,
    leaderAddress: node.addresses.get(leaderId as NodeId) ?? '',
    commitIndex: st.commit,
    appliedIndex: node.replica.applied,
    lastIndex: st.lastIndex,
    snapshotIndex: node.replica.latestSnapshotIndex,
    members,
    revisionBase: stats.revisionBase,
    sessions: stats.sessions,
    locks: stats.locks,
    waiters: stats.waiters,
  };
}

export function adminHandlers(node: CellNode): adminpb.CellAdminServer {
  const electionMs = node.config.electionTicks * node.config.tickMs;
  const moves = new MoveAdmin(node);
  return {
    freezeNamespace: handle(node, (req: adminpb.FreezeNamespaceRequest) => moves.freeze(req)),
    unfreezeNamespace: handle(node, (req: adminpb.UnfreezeNamespaceRequest) => moves.unfreeze(req)),
    exportNamespace: handle(node, (req: adminpb.ExportNamespaceRequest) => moves.exportPage(req)),
    importNamespace: handle(node, (req: adminpb.ImportNamespaceRequest) => moves.importPiece(req)),
    namespaceStatus: handle(node, (req: adminpb.NamespaceStatusRequest) => moves.status(req)),
    listNamespaces: handle(node, () => moves.list()),
    status: handle(node, async () => statusOf(node)),
    transferLeadership: handle(node, async (req: adminpb.TransferLeadershipRequest) => {
      requireLeader(node);
      const to = req.to ? NodeId(req.to) : node.bestTransferTarget();
      if (!to) throw new FencerError('INVALID_ARGUMENT', 'no other voter to transfer leadership to');
      if (!node.replica.status().voters.includes(to)) throw new FencerError('INVALID_ARGUMENT', `${to} is not a voter of this cell`);
      node.replica.transferLeadership(to);
      await until(() => !node.isLeader && node.replica.leader !== null, 4 * electionMs, `leadership transfer to ${to}`);
      return { leaderId: node.replica.leader ?? '' };
    }),
    addMember: handle(node, async (req: adminpb.AddMemberRequest) => {
      requireLeader(node);
      // The state machine's own checks, before anything is proposed (an absent peer address is checked as the
      // address it is derived from).
      const given: SetMemberAddressCommand = {
        kind: 'SetMemberAddress',
        id: req.id,
        address: req.address,
        peerAddress: req.peerAddress || req.address,
      };
      const bad = validateCommand(given);
      if (bad) throw new FencerError(bad.code, bad.message);
      const command = req.peerAddress !== '' ? given : { ...given, peerAddress: node.defaultPeerAddress(req.address) };
      // Replicated first, so that every replica, and whoever leads later, can reach the new member.
      const recorded = await node.propose(command);
      const outcome = recorded.outcome as Outcome;
      if (!outcome.ok) throw new FencerError(outcome.code, outcome.message);
      const index = await node.proposeConfChange({
        type: req.learner ? ConfChangeType.AddLearner : ConfChangeType.AddVoter,
        node: NodeId(req.id),
      });
      return { index };
    }),
    removeMember: handle(node, async (req: adminpb.RemoveMemberRequest) => {
      requireLeader(node);
      const index = await node.proposeConfChange({ type: ConfChangeType.RemoveNode, node: NodeId(req.id) });
      // Its addresses go once it is out; if this fails the entry stays, which is harmless.
      await node
        .propose({ kind: 'ForgetMember', id: req.id })
        .catch((err: unknown) =>
          node.env.logger.warn({ member: req.id, err: (err as Error).message }, "could not forget a removed member's addresses"),
        );
      return { index };
    }),
    promoteLearner: handle(node, async (req: adminpb.PromoteLearnerRequest) => {
      requireLeader(node);
      if (!node.replica.status().learners.includes(NodeId(req.id)))
        throw new FencerError('INVALID_ARGUMENT', `${req.id} is not a learner of this cell`);
      const index = await node.proposeConfChange({ type: ConfChangeType.AddVoter, node: NodeId(req.id) });
      return { index };
    }),
    takeSnapshot: handle(node, async () => {
      const r = await node.snapshotNow();
      return { index: r.index, bytes: r.bytes };
    }),
    claimNamespace: handle(node, async (req: adminpb.ClaimNamespaceRequest) => {
      requireLeader(node);
      const outcome = (await node.propose({ kind: 'ClaimNamespace', namespace: Namespace(req.namespace) })).outcome as Outcome;
      if (!outcome.ok) throw new FencerError(outcome.code, outcome.message);
      return { changed: 'changed' in outcome && outcome.changed === true };
    }),
    dropNamespace: handle(node, (req: adminpb.DropNamespaceRequest) => dropNamespace(node, req)),
    setNamespaceQuotas: handle(node, (req: adminpb.SetNamespaceQuotasRequest) => setNamespaceQuotas(node, req)),
    setNamespaceCredentials: handle(node, (req: adminpb.SetNamespaceCredentialsRequest) => setNamespaceCredentials(node, req)),
    readSnapshot: readSnapshotHandler(node),
  };
}

/** Replicates a tenant's quotas (docs/decisions/0020-tenant-quotas-and-rate-limits.md); checked before anything is proposed. */
async function setNamespaceQuotas(node: CellNode, req: adminpb.SetNamespaceQuotasRequest): Promise<adminpb.SetNamespaceQuotasResponse> {
  requireLeader(node);
  if (req.quotas === undefined) throw new FencerError('INVALID_ARGUMENT', 'quotas are required (0 in a field = no quota)');
  const command: SetNamespaceQuotasCommand = {
    kind: 'SetNamespaceQuotas',
    namespace: Namespace(req.namespace),
    quotas: { maxSessions: req.quotas.maxSessions, maxLocks: req.quotas.maxLocks, maxWaiters: req.quotas.maxWaiters },
  };
  return proposeChecked(node, command);
}

/** Validates, proposes and answers whether the namespace changed. */
async function proposeChecked(node: CellNode, command: Command): Promise<{ changed: boolean }> {
  const bad = validateCommand(command);
  if (bad) throw new FencerError(bad.code, bad.message);
  const outcome = (await node.propose(command)).outcome as Outcome;
  if (!outcome.ok) throw new FencerError(outcome.code, outcome.message);
  return { changed: 'changed' in outcome && outcome.changed === true };
}

/** Replicates a tenant's token hashes (docs/decisions/0016-tenant-credentials-and-mtls.md); checked before anything is proposed. */
async function setNamespaceCredentials(
  node: CellNode,
  req: adminpb.SetNamespaceCredentialsRequest,
): Promise<adminpb.SetNamespaceCredentialsResponse> {
  requireLeader(node);
  const command: SetNamespaceCredentialsCommand = {
    kind: 'SetNamespaceCredentials',
    namespace: Namespace(req.namespace),
    credentials: req.credentials.map((c) => ({ hash: c.hash, validUntilMs: c.validUntilMs })),
  };
  return proposeChecked(node, command);
}

/**
 * Freezes the namespace (so no session opens meanwhile), then drops it with a
 * tombstone; without `force` a namespace with live sessions is unfrozen again
 * and refused. A namespace this cell does not own is already dropped.
 */
async function dropNamespace(node: CellNode, req: adminpb.DropNamespaceRequest): Promise<adminpb.DropNamespaceResponse> {
  requireLeader(node);
  const namespace = Namespace(req.namespace);
  // A move's drop (its source, or a target's copy) carries the move's fence on each entry.
  const f = fenceOf(req.fence);
  const fence = f === undefined ? {} : { fence: f };
  const frozen = (await node.propose({ kind: 'FreezeNamespace', namespace, ...fence })).outcome as Outcome;
  if (!frozen.ok) {
    if (frozen.code === 'NAMESPACE_NOT_HERE') {
      // Not owned, but an import of it may have been staged here (a move rolling back): the drop discards it.
      const gone = (await node.propose({ kind: 'DropNamespace', namespace, ...fence })).outcome as Outcome;
      if (!gone.ok && gone.code === 'MOVE_FENCED') throw new FencerError(gone.code, gone.message);
      return { dropped: false, sessions: 0, locks: 0 };
    }
    throw new FencerError(frozen.code, frozen.message);
  }
  const sessions = node.cell.fsm.namespaces().find((ns) => ns.namespace === namespace)?.sessions ?? 0;
  if (sessions > 0 && !req.force) {
    await node.propose({ kind: 'UnfreezeNamespace', namespace, ...fence });
    throw new FencerError('NAMESPACE_NOT_EMPTY', `namespace "${namespace}" has ${sessions} live sessions; drop it with force to end them`);
  }
  const dropped = (await node.propose({ kind: 'DropNamespace', namespace, ...fence })).outcome as Outcome;
  if (!dropped.ok) throw new FencerError(dropped.code, dropped.message);
  const counts = dropped as { sessions?: number; locks?: number };
  return { dropped: true, sessions: counts.sessions ?? 0, locks: counts.locks ?? 0 };
}

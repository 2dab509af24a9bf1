/**
 * The admin calls of a tenant move on one node
 * (docs/decisions/0019-the-move-worker.md): freeze and unfreeze, the export
 * of a frozen namespace read on the leader a page at a time, the import in
 * pieces (one entry when it fits, else staged chunks and one import entry),
 * and what a move worker asks about a namespace. All go to the leader;
 * elsewhere they answer NOT_LEADER with a leader-hint. Each answers what its
 * effect is now, so a worker may repeat any of them. A worker's call carries
 * its move's fence, which the state machine checks where the step applies
 * (FAILED_PRECONDITION MOVE_FENCED for a step of a deposed leader or of a
 * state left behind); the export, a read, checks it here.
 */
import { type ErrorCode, FencerError, Namespace, RequestId, SessionId } from '@fencer/base';
import { heldImport, waitKey } from '@fencer/cell';
import type { adminpb } from '@fencer/protocol';
import { checkMoveFence, NO_QUOTAS, type Command, type ExportNamespaceOutcome, type MoveFence, type Outcome } from '@fencer/lock-fsm';
import type { CellNode } from './node.js';

/** Bytes of one export page and one import piece: far below a proposal's 1 MiB and gRPC's 4 MiB message. */
export const MOVE_CHUNK_BYTES_MAX = 512 * 1024;
/** Waits carried with one import (a namespace's waiters, bounded by the session and per-lock limits in practice). */
const WAITS_LEFT_MAX = 1_000_000;

function requireLeader(node: CellNode): void {
  if (!node.isLeader) throw new FencerError('NOT_LEADER', 'namespace moves go to the leader', node.leaderAddress());
}

async function proposeOk(node: CellNode, command: Command): Promise<{ index: number; outcome: Outcome & { ok: true } }> {
  const r = await node.propose(command);
  const outcome = r.outcome as Outcome;
  if (!outcome.ok) throw new FencerError(outcome.code, outcome.message);
  return { index: r.index, outcome };
}

/** The request's move fence, checked; undefined when the call carries none (an operator's). */
export function fenceOf(fence: adminpb.MoveFence | undefined): MoveFence | undefined {
  if (fence === undefined) return undefined;
  const f: MoveFence = { term: fence.term, journalIndex: fence.journalIndex, moveId: fence.moveId };
  const bad = checkMoveFence(f);
  if (bad !== undefined) throw new FencerError('INVALID_ARGUMENT', bad.message);
  return f;
}

/** `command` with the fence when there is one (an absent field, not an undefined one, in the log's shape). */
function withFence<C extends Command>(command: C, fence: MoveFence | undefined): C {
  return fence === undefined ? command : { ...command, fence };
}

function readBarrier(node: CellNode): Promise<void> {
  return new Promise((resolve, reject) => node.cell.core.readBarrier((e) => (e ? reject(e) : resolve())));
}

/** The last export this leader read, for the pages after the first. */
interface HeldExport {
  readonly namespace: string;
  readonly outcome: ExportNamespaceOutcome;
  readonly waitsLeft: adminpb.WaitLeft[];
  readonly waiters: number;
}

export class MoveAdmin {
  private held: HeldExport | undefined;

  constructor(private readonly node: CellNode) {}

  async freeze(req: adminpb.FreezeNamespaceRequest): Promise<adminpb.FreezeNamespaceResponse> {
    requireLeader(this.node);
    const namespace = Namespace(req.namespace);
    const { outcome } = await proposeOk(this.node, withFence({ kind: 'FreezeNamespace', namespace }, fenceOf(req.fence)));
    const info = this.node.cell.fsm.namespaceInfo(namespace);
    return { changed: (outcome as { changed?: boolean }).changed === true, namespaceRevision: info?.lastRevision ?? 0 };
  }

  async unfreeze(req: adminpb.UnfreezeNamespaceRequest): Promise<adminpb.UnfreezeNamespaceResponse> {
    requireLeader(this.node);
    const command = withFence({ kind: 'UnfreezeNamespace', namespace: Namespace(req.namespace) } as const, fenceOf(req.fence));
    const { outcome } = await proposeOk(this.node, command);
    return { changed: (outcome as { changed?: boolean }).changed === true };
  }

  async exportPage(req: adminpb.ExportNamespaceRequest): Promise<adminpb.ExportNamespaceResponse> {
    requireLeader(this.node);
    const namespace = Namespace(req.namespace);
    if (req.offset === 0) {
      // The freeze must have applied here: a read barrier first, then the state as applied.
      await readBarrier(this.node);
      const outcome = this.node.cell.fsm.readExport(namespace, fenceOf(req.fence));
      if (!outcome.ok) throw new FencerError(outcome.code as ErrorCode, outcome.message);
      const left = this.node.cell.waitsLeft(namespace);
      let waiters = 0;
      for (const w of this.node.cell.fsm.waiters()) if (w.sessionId.startsWith(`${namespace}:`)) waiters++;
      const waitsLeft = [...left].map(([k, ms]) => {
        const at = k.indexOf('\u0000');
        return { sessionId: k.slice(0, at), requestId: k.slice(at + 1), remainingMs: Math.round(ms) };
      });
      this.held = { namespace, outcome, waitsLeft, waiters };
    }
    const held = this.held;
    if (held === undefined || held.namespace !== namespace || req.offset > held.outcome.data.length) {
      throw new FencerError(
        'INVALID_ARGUMENT',
        `this node holds no export of "${namespace}" to read at ${req.offset}; start again at offset 0`,
      );
    }
    const { outcome } = held;
    return {
      data: outcome.data.subarray(req.offset, req.offset + MOVE_CHUNK_BYTES_MAX),
      totalBytes: outcome.data.length,
      highestRevision: outcome.highestRevision,
      namespaceRevision: outcome.namespaceRevision,
      sessions: outcome.sessions,
      locks: outcome.locks,
      waiters: held.waiters,
      waitsLeft: req.offset === 0 ? held.waitsLeft : [],
    };
  }

  async importPiece(req: adminpb.ImportNamespaceRequest): Promise<adminpb.ImportNamespaceResponse> {
    requireLeader(this.node);
    const namespace = Namespace(req.namespace);
    const { data, offset, totalBytes } = req;
    if (data.length > MOVE_CHUNK_BYTES_MAX || data.length === 0 || offset + data.length > totalBytes)
      throw new FencerError('INVALID_ARGUMENT', `a piece of 1..${MOVE_CHUNK_BYTES_MAX} bytes within the export's ${totalBytes}, please`);
    const fence = fenceOf(req.fence);
    if (offset === 0) {
      // An earlier attempt of this move imported it already: the same export, since its source stayed frozen.
      const held = heldImport(this.node.cell.fsm, namespace, fence);
      if (held !== undefined && !('ok' in held))
        return { done: true, already: true, stagedBytes: 0, sessions: held.sessions, locks: held.locks, revision: 0 };
      if (held !== undefined) throw new FencerError(held.code, held.message);
    }
    const last = offset + data.length === totalBytes;
    if (last) this.carryWaits(namespace, req.waitsLeft);
    const { activate } = req;
    if (offset === 0 && last)
      return this.imported(await proposeOk(this.node, withFence({ kind: 'ImportNamespace', namespace, data, activate }, fence)));
    const staged = await proposeOk(this.node, withFence({ kind: 'StageImportChunk', namespace, totalBytes, offset, data }, fence));
    const stagedBytes = (staged.outcome as { stagedBytes: number }).stagedBytes;
    if (!last) return { done: false, already: false, stagedBytes, sessions: 0, locks: 0, revision: 0 };
    return this.imported(await proposeOk(this.node, withFence({ kind: 'ImportStagedNamespace', namespace, totalBytes, activate }, fence)));
  }

  private carryWaits(namespace: Namespace, waits: readonly adminpb.WaitLeft[]): void {
    if (waits.length > WAITS_LEFT_MAX) throw new FencerError('INVALID_ARGUMENT', `at most ${WAITS_LEFT_MAX} waits per import`);
    const left = new Map<string, number>();
    for (const w of waits) left.set(waitKey(SessionId(w.sessionId), RequestId(w.requestId)), w.remainingMs);
    this.node.cell.moves.carryWaits(namespace, left);
  }

  private imported(r: { index: number; outcome: Outcome }): adminpb.ImportNamespaceResponse {
    const o = r.outcome as { sessions: number; locks: number };
    return {
      done: true,
      already: false,
      stagedBytes: 0,
      sessions: o.sessions,
      locks: o.locks,
      revision: r.index + this.node.cell.fsm.revisionBase,
    };
  }

  async status(req: adminpb.NamespaceStatusRequest): Promise<adminpb.NamespaceStatusResponse> {
    requireLeader(this.node);
    await readBarrier(this.node);
    const namespace = Namespace(req.namespace);
    const fsm = this.node.cell.fsm;
    const info = fsm.namespaceInfo(namespace);
    const unfreeze = this.node.cell.moves.unfreeze(namespace, this.node.env.clock.monoMs());
    return {
      state: info?.state ?? 'absent',
      lastRevision: info?.lastRevision ?? 0,
      sessions: info?.sessions ?? 0,
      locks: info?.locks ?? 0,
      waiters: info?.waiters ?? 0,
      quotas: info?.quotas ?? NO_QUOTAS,
      exportBytes: req.exportSize ? (fsm.exportBytes(namespace) ?? 0) : 0,
      importBytesMax: fsm.limits.importBytesMax,
      revision: fsm.revision,
      unfrozenHere: unfreeze !== undefined,
      unfrozenAgoMs: Math.round(unfreeze?.unfrozenAgoMs ?? 0),
      firstWriteSeen: unfreeze?.firstWriteAfterMs !== undefined,
      firstWriteAfterMs: Math.round(unfreeze?.firstWriteAfterMs ?? 0),
    };
  }

  async list(): Promise<adminpb.ListNamespacesResponse> {
    requireLeader(this.node);
    await readBarrier(this.node);
    return {
      namespaces: this.node.cell.fsm.namespaces().map((ns) => ({
        namespace: ns.namespace,
        state: ns.state,
        sessions: ns.sessions,
        locks: ns.locks,
        waiters: ns.waiters,
        quotas: { ...ns.quotas },
        credentials: ns.credentials.map((c) => ({ hash: c.hash, validUntilMs: c.validUntilMs })),
      })),
    };
  }
}

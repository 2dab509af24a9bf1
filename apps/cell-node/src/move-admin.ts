/**
 * The admin calls of a tenant move on one node
 * (docs/decisions/0019-the-move-worker.md): freeze and unfreeze, the export
 * of a frozen namespace read on the leader a page at a time, the import in
 * pieces (one entry when it fits, else staged chunks and one import entry),
 * and what a move worker asks about a namespace. All go to the leader;
 * elsewhere they answer NOT_LEADER with a leader-hint. Each answers what its
 * effect is now, so a worker may repeat any of them.
 */
import { type ErrorCode, FencerError, Namespace, RequestId, SessionId } from '@fencer/base';
import { waitKey } from '@fencer/cell';
import type { adminpb } from '@fencer/protocol';
import { NO_QUOTAS, type Command, type ExportNamespaceOutcome, type Outcome } from '@fencer/lock-fsm';
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
    const { outcome } = await proposeOk(this.node, { kind: 'FreezeNamespace', namespace });
    const info = this.node.cell.fsm.namespaceInfo(namespace);
    return { changed: (outcome as { changed?: boolean }).changed === true, namespaceRevision: info?.lastRevision ?? 0 };
  }

  async unfreeze(req: adminpb.UnfreezeNamespaceRequest): Promise<adminpb.UnfreezeNamespaceResponse> {
    requireLeader(this.node);
    const { outcome } = await proposeOk(this.node, { kind: 'UnfreezeNamespace', namespace: Namespace(req.namespace) });
    return { changed: (outcome as { changed?: boolean }).changed === true };
  }

  async exportPage(req: adminpb.ExportNamespaceRequest): Promise<adminpb.ExportNamespaceResponse> {
    requireLeader(this.node);
    const namespace = Namespace(req.namespace);
    if (req.offset === 0) {
      // The freeze must have applied here: a read barrier first, then the state as applied.
      await readBarrier(this.node);
      const outcome = this.node.cell.fsm.readExport(namespace);
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
    if (offset === 0) {
      const info = this.node.cell.fsm.namespaceInfo(namespace);
      // An earlier attempt imported it already: the same export, since its source stayed frozen.
      if (info !== undefined && info.state !== 'moved')
        return { done: true, already: true, stagedBytes: 0, sessions: info.sessions, locks: info.locks, revision: 0 };
    }
    const last = offset + data.length === totalBytes;
    if (last) this.carryWaits(namespace, req.waitsLeft);
    if (offset === 0 && last)
      return this.imported(await proposeOk(this.node, { kind: 'ImportNamespace', namespace, data, activate: req.activate }));
    const staged = await proposeOk(this.node, { kind: 'StageImportChunk', namespace, totalBytes, offset, data });
    const stagedBytes = (staged.outcome as { stagedBytes: number }).stagedBytes;
    if (!last) return { done: false, already: false, stagedBytes, sessions: 0, locks: 0, revision: 0 };
    return this.imported(await proposeOk(this.node, { kind: 'ImportStagedNamespace', namespace, totalBytes, activate: req.activate }));
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

/**
 * The admin calls of a tenant move against simulated cells, as
 * apps/cell-node/src/move-admin.ts serves them over gRPC: each runs on the
 * cell's leader (reached over the simulated network) and answers what its
 * effect is now, so the driver may repeat any of them. An answer is a value,
 * a refusal (the cell said no: a retry will not help) or transient (no
 * leader, lost, timed out).
 *
 * Every step carries the move's fence (the move id and the meta term its
 * pass runs under), as the control plane's worker sends it: a cell refuses a
 * step older than one it applied for the namespace (MOVE_FENCED), which the
 * driver takes as "this pass is stale" and ends it.
 *
 * The planted bug 'switchBeforeImport' answers an import as done as soon as
 * the target's leader proposed it, before it committed: the driver then
 * journals the switch with the import still uncommitted.
 */
import { type FencerError, Namespace } from '@fencer/base';
import { heldImport, type LockCell } from '@fencer/cell';
import type { ExportNamespaceOutcome, MoveFence, Outcome } from '@fencer/lock-fsm';
import type { Member, MovesWorld } from './moves-world.js';

/** How long the driver waits for a cell's answer. */
export const CELL_CALL_TIMEOUT_MS = 1_000;

export type CellAnswer<T> =
  | { readonly kind: 'ok'; readonly value: T }
  | { readonly kind: 'refused'; readonly code: string; readonly message: string }
  | { readonly kind: 'transient'; readonly message: string };

export interface NamespaceStatus {
  readonly state: string;
  readonly exportBytes: number;
  readonly importBytesMax: number;
  readonly unfreeze: { readonly unfrozenAgoMs: number; readonly firstWriteAfterMs: number | undefined } | undefined;
}

export interface HeldExport {
  readonly outcome: ExportNamespaceOutcome;
  readonly waitsLeft: Map<string, number>;
}

type Answer<T> = (a: CellAnswer<T>) => void;

const TRANSIENT_CODES = new Set(['NOT_LEADER', 'NO_LEADER', 'DEADLINE_EXCEEDED', 'SHUTTING_DOWN', 'OUTCOME_UNKNOWN', 'TOO_MANY_REQUESTS']);

function fromError<T>(e: FencerError): CellAnswer<T> {
  return TRANSIENT_CODES.has(e.code) ? { kind: 'transient', message: e.message } : { kind: 'refused', code: e.code, message: e.message };
}

function proposeThen<T>(cell: LockCell, command: Parameters<LockCell['propose']>[0], answer: Answer<T>, then: (o: Outcome) => T): void {
  cell.propose(command, (r) => {
    if (!r.ok) return answer(fromError(r.error));
    const o = r.value.result as Outcome;
    answer(o.ok ? { kind: 'ok', value: then(o) } : { kind: 'refused', code: o.code, message: o.message });
  });
}

export class MoveCells {
  constructor(
    private readonly w: MovesWorld,
    private readonly bug: { readonly switchBeforeImport: boolean },
  ) {}

  /** Runs `serve` on `cell`'s leader; transient when it has none or the call is lost. */
  private onLeader<T>(cell: string, serve: (c: LockCell, answer: Answer<T>) => void, done: Answer<T>): void {
    const leader = this.w.leaderOf(cell as Member['group']);
    if (leader === undefined) return done({ kind: 'transient', message: `cell ${cell} has no leader` });
    this.w.call<CellAnswer<T>>(
      leader,
      (m, answer) => {
        if (m.cell === undefined || !m.cell.isLeader) return answer({ kind: 'transient', message: `${m.id} does not lead ${cell}` });
        serve(m.cell, answer);
      },
      CELL_CALL_TIMEOUT_MS,
      (a) => done(a ?? { kind: 'transient', message: `a call to ${cell}'s leader timed out` }),
    );
  }

  status(cell: string, namespace: string, exportSize: boolean, done: Answer<NamespaceStatus>): void {
    this.onLeader<NamespaceStatus>(
      cell,
      (c, answer) =>
        c.core.readBarrier((e) => {
          if (e) return answer(fromError(e));
          const info = c.fsm.namespaceInfo(namespace);
          answer({
            kind: 'ok',
            value: {
              state: info?.state ?? 'absent',
              exportBytes: exportSize ? (c.fsm.exportBytes(Namespace(namespace)) ?? 0) : 0,
              importBytesMax: c.fsm.limits.importBytesMax,
              unfreeze: c.moves.unfreeze(namespace, c.env.clock.monoMs()),
            },
          });
        }),
      done,
    );
  }

  /** Freezes; the value is the namespace's last revision. */
  freeze(cell: string, namespace: string, fence: MoveFence, done: Answer<number>): void {
    this.onLeader<number>(
      cell,
      (c, answer) =>
        proposeThen(
          c,
          { kind: 'FreezeNamespace', namespace: Namespace(namespace), fence },
          answer,
          () => c.fsm.namespaceInfo(namespace)?.lastRevision ?? 0,
        ),
      done,
    );
  }

  unfreeze(cell: string, namespace: string, fence: MoveFence, done: Answer<null>): void {
    this.onLeader<null>(
      cell,
      (c, answer) => proposeThen(c, { kind: 'UnfreezeNamespace', namespace: Namespace(namespace), fence }, answer, () => null),
      done,
    );
  }

  /** Freezes (if it still serves) and drops; a namespace not held here answers ok. */
  drop(cell: string, namespace: string, fence: MoveFence, done: Answer<null>): void {
    const ns = Namespace(namespace);
    this.onLeader<null>(
      cell,
      (c, answer) =>
        proposeThen<null>(
          c,
          { kind: 'FreezeNamespace', namespace: ns, fence },
          (a) => {
            if (a.kind === 'refused' && a.code === 'NAMESPACE_NOT_HERE') return answer({ kind: 'ok', value: null });
            if (a.kind !== 'ok') return answer(a);
            proposeThen(c, { kind: 'DropNamespace', namespace: ns, fence }, answer, () => null);
          },
          () => null,
        ),
      done,
    );
  }

  /** The export of the frozen namespace, read behind a barrier on the leader, with what is left of its waits. */
  exportNamespace(cell: string, namespace: string, fence: MoveFence, done: Answer<HeldExport>): void {
    this.onLeader<HeldExport>(
      cell,
      (c, answer) =>
        c.core.readBarrier((e) => {
          if (e) return answer(fromError(e));
          const outcome = c.fsm.readExport(Namespace(namespace), fence);
          if (!outcome.ok) return answer({ kind: 'refused', code: outcome.code, message: outcome.message });
          answer({ kind: 'ok', value: { outcome, waitsLeft: c.waitsLeft(namespace) } });
        }),
      done,
    );
  }

  /** Imports frozen; an import of this move the target holds already answers its counts. */
  importNamespace(
    cell: string,
    namespace: string,
    fence: MoveFence,
    held: HeldExport,
    done: Answer<{ sessions: number; locks: number }>,
  ): void {
    const ns = Namespace(namespace);
    this.onLeader<{ sessions: number; locks: number }>(
      cell,
      (c, answer) => {
        const already = heldImport(c.fsm, namespace, fence);
        if (already !== undefined)
          return answer(
            'ok' in already ? { kind: 'refused', code: already.code, message: already.message } : { kind: 'ok', value: already },
          );
        c.moves.carryWaits(namespace, held.waitsLeft);
        const counts = { sessions: held.outcome.sessions, locks: held.outcome.locks };
        const command = { kind: 'ImportNamespace', namespace: ns, data: held.outcome.data, activate: false, fence } as const;
        proposeThen(c, command, answer, () => counts);
        // The planted bug: the import is reported done before it committed.
        if (this.bug.switchBeforeImport) answer({ kind: 'ok', value: counts });
      },
      done,
    );
  }
}

/**
 * The leader task that fills the snapshot catalogue
 * (docs/decisions/0014-snapshots-in-object-storage.md). Each pass:
 *
 * 1. records a snapshot (RecordSnapshot, state `uploading`) for every cell
 *    whose newest done one is older than the interval and that has none
 *    uploading, unless the schedule is off (interval 0);
 * 2. uploads every `uploading` record, oldest first: the cell leader takes
 *    a snapshot and streams it (snapshot-source.ts), @fencer/object-store
 *    publishes it (object, read-back check, manifest last), then
 *    FinishSnapshot records index, bytes, sha256 and location, or `failed`
 *    with the error once every attempt failed;
 * 3. applies retention (the last N, plus one a day for D days): each chosen
 *    snapshot's manifest and object are deleted, then its record
 *    (DeleteSnapshot), so a record never names a deleted object for longer
 *    than a failed pass.
 *
 * Every step is idempotent by record id, so a new leader resuming an
 * `uploading` record from a deposed one just uploads it again; a
 * FinishSnapshot that lost that race is refused by the meta state machine
 * and changes nothing. A POST wakes the task (LeaderLoop.wake) so its
 * upload starts at once.
 */
import type { Logger } from 'pino';
import { deleteSnapshot, publishSnapshot, snapshotsToDelete, type ObjectStore, type RetentionPolicy } from '@fencer/object-store';
import { isMetaFailure, type MetaCommand, type MetaStateMachine, type SnapshotRecord } from '@fencer/meta-fsm';
import type { MetaStore } from '../meta-group.js';
import type { LeaderTask } from './leader-loop.js';
import type { SnapshotSource } from './snapshot-source.js';

export const SNAPSHOT_TASK = 'snapshots';

export interface SnapshotSchedule extends RetentionPolicy {
  /** A cell is snapshotted when its newest done snapshot is this old; 0 turns the schedule off (POST still works). */
  readonly intervalMs: number;
  /** Tries per upload (each reads the cell again); then the record is `failed`. */
  readonly uploadAttempts: number;
  /** Wait before the second try; doubled before each later one. */
  readonly retryDelayMs: number;
}

export const snapshotScheduleDefault: SnapshotSchedule = {
  intervalMs: 3_600_000,
  keepLast: 24,
  keepDailyDays: 7,
  uploadAttempts: 3,
  retryDelayMs: 1_000,
};

/** After a failed snapshot, the next scheduled one waits at most this long (not a whole interval). */
const retryAfterFailureMsMax = 60_000;
/** The catalogue's error field holds at most this many characters (@fencer/meta-fsm NOTE_CHARS_MAX). */
const errorCharsMax = 1_000;

export interface SnapshotMetrics {
  uploaded(cell: string, bytes: number): void;
  uploadFailed(cell: string): void;
  /** The newest done snapshot of `cell` was asked for at `atMs` (wall clock): the snapshot-age alert's input. */
  newestDone(cell: string, atMs: number): void;
}

export interface SnapshotTaskDeps {
  readonly meta: MetaStore;
  readonly cellIds: () => readonly string[];
  readonly source: SnapshotSource;
  readonly store: ObjectStore;
  readonly schedule: SnapshotSchedule;
  readonly wallMs: () => number;
  readonly newId: () => string;
  readonly logger: Logger;
  readonly metrics?: SnapshotMetrics;
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason as Error);
      },
      { once: true },
    );
  });
}

export class SnapshotTask implements LeaderTask {
  readonly name = SNAPSHOT_TASK;
  readonly intervalMs: number;

  constructor(private readonly deps: SnapshotTaskDeps) {
    const every = deps.schedule.intervalMs;
    // Often enough to start each cell's snapshot close to when it is due, rarely enough to cost nothing.
    this.intervalMs = every === 0 ? retryAfterFailureMsMax : Math.min(Math.max(every, 1_000), retryAfterFailureMsMax);
  }

  async runPass(signal: AbortSignal): Promise<void> {
    await this.recordDue(await this.deps.meta.read(), signal);
    const uploading = (await this.deps.meta.read()).snapshotRecords().filter((r) => r.state === 'uploading');
    for (const record of uploading) {
      signal.throwIfAborted();
      await this.upload(record, signal);
    }
    signal.throwIfAborted();
    const state = await this.deps.meta.read();
    await this.retain(state, signal);
    this.reportNewest(state);
  }

  /** From the catalogue, so a new leader reports every cell's age at its first pass. */
  private reportNewest(state: MetaStateMachine): void {
    const newest = new Map<string, number>();
    for (const r of state.snapshotRecords()) if (r.state === 'done') newest.set(r.cell, Math.max(newest.get(r.cell) ?? 0, r.createdAtMs));
    for (const [cell, atMs] of newest) this.deps.metrics?.newestDone(cell, atMs);
  }

  private async write(command: MetaCommand): Promise<void> {
    const applied = await this.deps.meta.write({ command });
    if (isMetaFailure(applied.outcome))
      this.deps.logger.warn(
        { command: command.kind, code: applied.outcome.code, detail: applied.outcome.detail },
        'snapshot catalogue refused',
      );
  }

  private async recordDue(state: MetaStateMachine, signal: AbortSignal): Promise<void> {
    const { intervalMs } = this.deps.schedule;
    if (intervalMs === 0) return;
    const now = this.deps.wallMs();
    const records = state.snapshotRecords();
    for (const cell of this.deps.cellIds()) {
      const mine = records.filter((r) => r.cell === cell);
      if (mine.some((r) => r.state === 'uploading')) continue;
      const newest = (s: SnapshotRecord['state']): number =>
        Math.max(-Infinity, ...mine.filter((r) => r.state === s).map((r) => r.createdAtMs));
      if (now - newest('done') < intervalMs || now - newest('failed') < Math.min(intervalMs, retryAfterFailureMsMax)) continue;
      signal.throwIfAborted();
      await this.write({ kind: 'RecordSnapshot', id: this.deps.newId(), cell, atMs: now });
      this.deps.logger.info({ cell }, 'scheduled snapshot recorded');
    }
  }

  /** Uploads one record's snapshot, retrying; finishes the record done or failed. Throws only when aborted. */
  private async upload(record: SnapshotRecord, signal: AbortSignal): Promise<void> {
    const { schedule, logger, metrics } = this.deps;
    if (!this.deps.cellIds().includes(record.cell)) {
      await this.write({
        kind: 'FinishSnapshot',
        id: record.id,
        state: 'failed',
        error: `no cell "${record.cell}" in this control plane's cell list`,
      });
      return;
    }
    let lastError = '';
    for (let attempt = 1; attempt <= schedule.uploadAttempts; attempt++) {
      try {
        const { info, body } = await this.deps.source.read(record.cell, signal);
        const published = await publishSnapshot(this.deps.store, info, body, record.createdAtMs, signal);
        const { manifest } = published;
        await this.write({
          kind: 'FinishSnapshot',
          id: record.id,
          state: 'done',
          index: manifest.index,
          bytes: manifest.bytes,
          sha256: manifest.sha256,
          location: published.location,
        });
        metrics?.uploaded(record.cell, manifest.bytes);
        logger.info(
          { cell: record.cell, id: record.id, index: manifest.index, bytes: manifest.bytes, location: published.location },
          'snapshot uploaded',
        );
        return;
      } catch (err) {
        if (signal.aborted) throw err;
        lastError = (err as Error).message;
        metrics?.uploadFailed(record.cell);
        logger.warn({ cell: record.cell, id: record.id, attempt, err: lastError }, 'snapshot upload failed');
        if (attempt < schedule.uploadAttempts) await delay(schedule.retryDelayMs * 2 ** (attempt - 1), signal);
      }
    }
    const error = `${schedule.uploadAttempts} attempts failed; last: ${lastError}`.slice(0, errorCharsMax);
    await this.write({ kind: 'FinishSnapshot', id: record.id, state: 'failed', error });
  }

  /** The object key of a location in this store, or undefined when the location is elsewhere (the store was changed). */
  private keyOf(location: string): string | undefined {
    const root = `${this.deps.store.url}/`;
    return location.startsWith(root) ? location.slice(root.length) : undefined;
  }

  private async retain(state: MetaStateMachine, signal: AbortSignal): Promise<void> {
    const records = state.snapshotRecords();
    const now = this.deps.wallMs();
    for (const cell of new Set(records.map((r) => r.cell))) {
      for (const id of snapshotsToDelete(
        records.filter((r) => r.cell === cell),
        this.deps.schedule,
        now,
      )) {
        signal.throwIfAborted();
        const record = state.snapshotRecord(id)!;
        if (record.location !== undefined) {
          const key = this.keyOf(record.location);
          if (key !== undefined) await deleteSnapshot(this.deps.store, key, signal);
          else
            this.deps.logger.warn(
              { id, location: record.location, store: this.deps.store.url },
              'a retired snapshot is outside the current store; its objects stay',
            );
        }
        await this.write({ kind: 'DeleteSnapshot', id });
        this.deps.logger.info({ cell, id, location: record.location }, 'snapshot retired');
      }
    }
  }
}

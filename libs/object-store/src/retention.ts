/**
 * Which snapshots of one cell to keep: the newest `keepLast` done ones, plus
 * the newest done one of each of the last `keepDailyDays` days (UTC), as
 * backup tools keep "the last N and one a day". Failed records explain
 * what went wrong until a newer snapshot of the cell is done; then they go
 * too. A snapshot still uploading is never chosen. Pure: the caller deletes
 * the objects and the catalogue records together.
 */

export interface RetentionPolicy {
  readonly keepLast: number;
  readonly keepDailyDays: number;
}

export interface RetainedRecord {
  readonly id: string;
  readonly state: 'uploading' | 'done' | 'failed';
  readonly createdAtMs: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Ids of the records to delete, oldest first. */
export function snapshotsToDelete(records: readonly RetainedRecord[], policy: RetentionPolicy, nowMs: number): string[] {
  const newestFirst = [...records].sort((a, b) => b.createdAtMs - a.createdAtMs || (a.id < b.id ? 1 : -1));
  const done = newestFirst.filter((r) => r.state === 'done');
  const keep = new Set(done.slice(0, policy.keepLast).map((r) => r.id));
  const today = Math.floor(nowMs / DAY_MS);
  const daysKept = new Set<number>();
  for (const r of done) {
    const day = Math.floor(r.createdAtMs / DAY_MS);
    if (today - day >= policy.keepDailyDays || daysKept.has(day)) continue;
    daysKept.add(day);
    keep.add(r.id);
  }
  const newestDoneMs = done[0]?.createdAtMs ?? -Infinity;
  const out = newestFirst.filter((r) => {
    if (r.state === 'uploading') return false;
    if (r.state === 'failed') return r.createdAtMs < newestDoneMs;
    return !keep.has(r.id);
  });
  return out.reverse().map((r) => r.id);
}

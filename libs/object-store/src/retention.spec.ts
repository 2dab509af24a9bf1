/**
 * Goal: retention keeps each cell's newest N done snapshots plus the newest
 * of each of the last D days, never an uploading one, and lets failed ones
 * go once a newer snapshot is done.
 * Method: hand-built catalogues of one cell with known times; the chosen ids
 * are compared with the rule worked out by hand.
 */
import { describe, expect, it } from 'vitest';
import { snapshotsToDelete, type RetainedRecord } from './retention.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = 100 * DAY + 12 * HOUR;

const done = (id: string, atMs: number): RetainedRecord => ({ id, state: 'done', createdAtMs: atMs });

describe('snapshotsToDelete', () => {
  it('keeps the last N of today and one a day for D days; deletes the rest oldest first', () => {
    const records = [
      done('d-5', NOW - 5 * DAY),
      done('d-2a', NOW - 2 * DAY - HOUR),
      done('d-2b', NOW - 2 * DAY),
      done('d-1', NOW - DAY),
      done('t-3', NOW - 3 * HOUR),
      done('t-2', NOW - 2 * HOUR),
      done('t-1', NOW - HOUR),
    ];
    // Last 2: t-1, t-2. Daily for 3 days (today, -1, -2): t-1 (today), d-1, d-2b. d-5 is past the window.
    expect(snapshotsToDelete(records, { keepLast: 2, keepDailyDays: 3 }, NOW)).toEqual(['d-5', 'd-2a', 't-3']);
  });

  it('never deletes an uploading record; a failed one goes only once a newer done one exists', () => {
    const records: RetainedRecord[] = [
      { id: 'f-old', state: 'failed', createdAtMs: NOW - 3 * HOUR },
      done('ok', NOW - 2 * HOUR),
      { id: 'f-new', state: 'failed', createdAtMs: NOW - HOUR },
      { id: 'up', state: 'uploading', createdAtMs: NOW - 10 * DAY },
    ];
    expect(snapshotsToDelete(records, { keepLast: 1, keepDailyDays: 0 }, NOW)).toEqual(['f-old']);
  });

  it('keeps everything while there are no more done snapshots than keepLast', () => {
    const records = [done('a', NOW - 9 * DAY), done('b', NOW - 8 * DAY)];
    expect(snapshotsToDelete(records, { keepLast: 2, keepDailyDays: 0 }, NOW)).toEqual([]);
    expect(snapshotsToDelete(records, { keepLast: 1, keepDailyDays: 0 }, NOW)).toEqual(['a']);
  });
});

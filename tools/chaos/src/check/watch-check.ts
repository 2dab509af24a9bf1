/**
 * Watch streams against the final committed log (docs/architecture.md,
 * "Promises", on Watch: events carry their revision; resuming from
 * since_revision skips nothing and repeats nothing; too old a revision is
 * COMPACTED).
 *
 * Each recorded stream is checked on its own:
 * - since = 0 starts with one SNAPSHOT per live lock at one revision r0 (the
 *   locks' state there must be the log's state at r0), then PROGRESS at r0;
 * - events come in revision order, after the starting revision, without
 *   duplicates;
 * - the events equal the log's events for the prefix, exactly, from the
 *   starting revision up to the last revision the stream confirmed (a
 *   PROGRESS, or the revision of a later event); the last revision may be cut
 *   short by the stream's end, so there only a prefix is required;
 * - COMPACTED may end a stream only when it resumed (since > 0).
 * Revisions the log no longer holds (compacted into a snapshot) are not
 * compared, only counted.
 */
import type { WatchSegment } from '../history.js';
import { VIOLATIONS_KEPT_MAX } from '../limits.js';
import type { CanonicalEvent } from '../final-log.js';

export interface WatchReport {
  readonly streams: number;
  readonly events: number;
  readonly eventsCompared: number;
  readonly resumed: number;
  readonly compactedEnds: number;
  readonly snapshotsCompared: number;
  readonly violations: string[];
  readonly violationCount: number;
}

export interface CanonicalLog {
  /** Revisions from here on are in the log (above the replayed snapshot). */
  readonly floor: number;
  /** The common commit index: no event can be later. */
  readonly last: number;
  readonly events: ReadonlyMap<number, readonly CanonicalEvent[]>;
  /** State of the locks under a prefix at a revision, as `lockSummary` strings (from the replay's snapshot queries). */
  readonly snapshots: ReadonlyMap<string, ReadonlyMap<string, string>>;
}

const key = (e: readonly [number, string, string, string, number]): string => `${e[0]}/${e[1]}/${e[2]}/${e[3]}/${e[4]}`;

export function watchSnapshotQueries(watches: ReadonlyArray<{ seg: WatchSegment }>): Array<{ revision: number; prefix: string }> {
  const out: Array<{ revision: number; prefix: string }> = [];
  for (const { seg } of watches) {
    if (seg.since !== 0) continue;
    const p = seg.events.find((e) => e[1] === 'PROGRESS');
    if (p) out.push({ revision: p[0], prefix: seg.prefix });
  }
  return out;
}

export function checkWatches(watches: ReadonlyArray<{ p: string; seg: WatchSegment }>, log: CanonicalLog): WatchReport {
  const violations: string[] = [];
  let count = 0;
  let events = 0;
  let eventsCompared = 0;
  let resumed = 0;
  let compactedEnds = 0;
  let snapshotsCompared = 0;
  for (const { p, seg } of watches) {
    const where = `${p} watch ${seg.prefix} since ${seg.since} via endpoint ${seg.endpoint} at ${seg.tStart.toFixed(1)}`;
    const report = (v: string): void => {
      if (count++ < VIOLATIONS_KEPT_MAX) violations.push(`${where}: ${v}`);
    };
    events += seg.events.length;
    if (seg.since > 0) resumed++;
    if (seg.end === 'COMPACTED') {
      compactedEnds++;
      if (seg.since === 0) report('ended COMPACTED although it asked for no history');
    }
    let i = 0;
    let start = seg.since;
    if (seg.since === 0) {
      // SNAPSHOT events, then PROGRESS at their revision.
      const snaps: Array<readonly [number, string, string, string, number]> = [];
      while (i < seg.events.length && seg.events[i]![1] === 'SNAPSHOT') snaps.push(seg.events[i++]!);
      const progress = seg.events[i];
      if (!progress) continue; // ended before the first PROGRESS: nothing to check
      if (progress[1] !== 'PROGRESS') {
        report(`expected PROGRESS after ${snaps.length} SNAPSHOT events, got ${progress[1]} at ${progress[0]}`);
        continue;
      }
      start = progress[0];
      if (snaps.some((s) => s[0] !== start)) report(`SNAPSHOT revisions differ from the PROGRESS revision ${start}`);
      const expected = log.snapshots.get(`${start} ${seg.prefix}`);
      if (expected && start >= log.floor) {
        snapshotsCompared++;
        const got = new Map(snaps.map((s) => [s[2], s[3]]));
        for (const [name, summary] of expected)
          if (got.get(name) !== summary)
            report(`SNAPSHOT of ${name} at ${start} is "${got.get(name) ?? '(missing)'}", the log says "${summary}"`);
        for (const name of got.keys()) if (!expected.has(name)) report(`SNAPSHOT of ${name} at ${start}, which the log has free`);
      }
      i++;
    }
    // Order, bounds and duplicates; the confirmed revision.
    const delivered: Array<readonly [number, string, string, string, number]> = [];
    const seen = new Set<string>();
    let last = start;
    let confirmed = start;
    for (; i < seg.events.length; i++) {
      const e = seg.events[i]!;
      if (e[1] === 'SNAPSHOT') {
        report(`SNAPSHOT at ${e[0]} in the middle of the stream`);
        continue;
      }
      if (e[1] === 'PROGRESS') {
        if (e[0] < last) report(`PROGRESS at ${e[0]} after an event at ${last}`);
        confirmed = Math.max(confirmed, e[0]);
        continue;
      }
      if (e[0] <= start) report(`event ${e[1]} ${e[2]} at revision ${e[0]}, not after the starting revision ${start}`);
      if (e[0] < last) report(`event at revision ${e[0]} after one at ${last}`);
      if (e[0] > last) confirmed = Math.max(confirmed, last);
      last = Math.max(last, e[0]);
      if (e[0] > log.last) report(`event at revision ${e[0]}, past the final commit index ${log.last}`);
      const k = key(e);
      if (seen.has(k)) report(`duplicate event ${k}`);
      seen.add(k);
      delivered.push(e);
    }
    // Exact comparison with the log over (start, last].
    const lo = Math.max(start + 1, log.floor);
    const byRev = new Map<number, Array<readonly [number, string, string, string, number]>>();
    for (const e of delivered) {
      const list = byRev.get(e[0]) ?? [];
      list.push(e);
      byRev.set(e[0], list);
    }
    for (let rev = lo; rev <= Math.min(Math.max(last, confirmed), log.last); rev++) {
      const want = (log.events.get(rev) ?? []).filter((c) => c[1].startsWith(seg.prefix));
      const got = byRev.get(rev) ?? [];
      const complete = rev <= confirmed || rev < last;
      const n = complete ? Math.max(want.length, got.length) : got.length;
      let differs = complete && want.length !== got.length;
      for (let k = 0; k < n && !differs; k++) {
        const w = want[k];
        const g = got[k];
        if (!w || !g || w[0] !== g[1] || w[1] !== g[2] || w[2] !== g[3] || w[3] !== g[4]) differs = true;
      }
      eventsCompared += got.length;
      if (differs) {
        report(
          `at revision ${rev} the stream has [${got.map((g) => `${g[1]} ${g[2]} ${g[3]} ${g[4]}`).join('; ')}], the log has [${want.map((w) => w.join(' ')).join('; ')}]`,
        );
      }
    }
  }
  return { streams: watches.length, events, eventsCompared, resumed, compactedEnds, snapshotsCompared, violations, violationCount: count };
}

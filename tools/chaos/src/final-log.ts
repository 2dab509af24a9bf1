/**
 * The final committed logs, read back from every replica's data directory
 * after the cell stopped: each is opened with the WAL's own recovery, read
 * (snapshot, then entries up to the common commit index) and closed.
 *
 * From them: whether the logs are identical where they overlap, each
 * replica's state hash at the common index (its own snapshot plus its own
 * entries replayed through the lock state machine), and, from the longest
 * log, the canonical events per revision (what every watch must deliver),
 * the grants per revision (what every acknowledged grant must match), and
 * counts by command kind (expiries, leader terms).
 */
import { assert } from '@fencer/base';
import { EntryType, type Entry } from '@fencer/raft';
import { openRaftLogStore, type WalStore } from '@fencer/wal';
import { NodeDisk } from '@fencer/wal/node';
import { LockStateMachine, decodeCommand, isFailure, type LockState } from '@fencer/lock-fsm';

export interface ReplicaLog {
  readonly id: string;
  readonly snapshotIndex: number;
  readonly snapshotData: Uint8Array;
  /** First entry index in the log (snapshot index + 1). */
  readonly firstIndex: number;
  readonly lastIndex: number;
  /** Entries firstIndex..upTo (inclusive). */
  readonly entries: readonly Entry[];
}

function open(dir: string): Promise<WalStore> {
  return new Promise((resolve, reject) =>
    openRaftLogStore(new NodeDisk(), dir, {}, (err, store) => (err || !store ? reject(err ?? new Error('no store')) : resolve(store))),
  );
}

function close(store: WalStore): Promise<void> {
  return new Promise((resolve, reject) => store.close((err) => (err ? reject(err) : resolve())));
}

/** Reads one replica's log up to `upTo` (inclusive). The cell must be stopped. */
export async function readReplicaLog(id: string, dir: string, upTo: number): Promise<ReplicaLog> {
  const store = await open(dir);
  try {
    const snap = store.snapshot();
    const firstIndex = store.firstIndex();
    const lastIndex = store.lastIndex();
    const entries: Entry[] = [];
    const hi = Math.min(lastIndex, upTo);
    let lo = firstIndex;
    while (lo <= hi) {
      const batch = store.entries(lo as never, (hi + 1) as never, 16 * 1024 * 1024);
      assert(batch.length > 0, `entries from ${lo} on ${id}`);
      for (const e of batch) {
        assert(e.index === lo, `entries of ${id} are contiguous at ${lo}`);
        entries.push(e);
        lo++;
      }
    }
    return { id, snapshotIndex: snap.meta.index, snapshotData: snap.data, firstIndex, lastIndex, entries };
  } finally {
    await close(store);
  }
}

/** A lock's state as one comparable string: holders `session@token/mode`, then waiters `session/mode/request`. */
export function lockSummary(lock: LockState): string {
  const h = lock.holders.map((x) => `${x.sessionId}@${x.token}/${x.mode === 'SHARED' ? 'S' : 'X'}`).join(',');
  const w = lock.waiters.map((x) => `${x.sessionId}/${x.mode === 'SHARED' ? 'S' : 'X'}/${x.requestId}`).join(',');
  return `${h}|${w}`;
}

/** One canonical watch event: [type, name, session, token]. */
export type CanonicalEvent = readonly [type: string, name: string, session: string, token: number];

export interface Replay {
  readonly fsm: LockStateMachine;
  readonly events: Map<number, CanonicalEvent[]>;
  readonly kinds: Record<string, number>;
  readonly okKinds: Record<string, number>;
  readonly terms: Set<number>;
  /** Each session an ExpireSession ended (outcome ok), with that entry's revision. */
  readonly expiredAt: Map<string, number>;
  /** Answers to the snapshot queries: `${revision} ${prefix}` → name → summary. */
  readonly snapshots: Map<string, Map<string, string>>;
}

function fsmAt(log: ReplicaLog): LockStateMachine {
  return log.snapshotIndex > 0
    ? LockStateMachine.restore(log.snapshotData, { autoClaim: true })
    : new LockStateMachine({ autoClaim: true });
}

/** Applies a replica's entries as the cell node does: blank entries and membership changes never reach the state machine. */
export function replay(log: ReplicaLog, snapshotQueries: ReadonlyArray<{ revision: number; prefix: string }> = []): Replay {
  const fsm = fsmAt(log);
  const events = new Map<number, CanonicalEvent[]>();
  const kinds: Record<string, number> = {};
  const okKinds: Record<string, number> = {};
  const terms = new Set<number>();
  const expiredAt = new Map<string, number>();
  const snapshots = new Map<string, Map<string, string>>();
  const queries = [...snapshotQueries].filter((q) => q.revision >= log.snapshotIndex).sort((a, b) => a.revision - b.revision);
  let q = 0;
  const answer = (upTo: number): void => {
    while (q < queries.length && queries[q]!.revision <= upTo) {
      const { revision, prefix } = queries[q++]!;
      const key = `${revision} ${prefix}`;
      if (snapshots.has(key)) continue;
      const states = new Map<string, string>();
      let pageToken = '';
      for (let page = 0; page < 1_000; page++) {
        const p = fsm.listLocks(prefix, 1_000, pageToken);
        if (isFailure(p)) break;
        for (const l of p.locks) states.set(l.name, lockSummary(l));
        pageToken = p.nextPageToken;
        if (pageToken === '') break;
      }
      snapshots.set(key, states);
    }
  };
  for (const e of log.entries) {
    // Everything up to the previous entry is applied: answer queries for revisions below this one.
    answer(e.index - 1);
    terms.add(e.term);
    if (e.type === EntryType.ConfChange || e.data.byteLength === 0) {
      kinds.Blank = (kinds.Blank ?? 0) + 1;
      continue;
    }
    const command = decodeCommand(e.data);
    const applied = fsm.apply(e.index, command);
    kinds[command.kind] = (kinds[command.kind] ?? 0) + 1;
    if ((applied.outcome as { ok: boolean }).ok) {
      okKinds[command.kind] = (okKinds[command.kind] ?? 0) + 1;
      if (command.kind === 'ExpireSession') expiredAt.set(command.sessionId, applied.revision);
    }
    if (applied.events.length > 0)
      events.set(
        applied.revision,
        applied.events.map((ev) => [ev.type, ev.name, ev.sessionId, ev.token] as const),
      );
  }
  answer(Infinity);
  return { fsm, events, kinds, okKinds, terms, expiredAt, snapshots };
}

export interface FinalLogs {
  readonly commonIndex: number;
  readonly replicas: ReadonlyArray<{ id: string; snapshotIndex: number; firstIndex: number; lastIndex: number; hash: string }>;
  /** Differences between replicas' logs where they overlap, and hash differences. */
  readonly problems: string[];
  /** The replica whose log reaches furthest back. */
  readonly canonical: ReplicaLog;
  readonly replay: Replay;
}

/** Reads every replica's log, compares them, and replays the longest one. */
export async function readFinalLogs(
  replicas: ReadonlyArray<{ id: string; dataDir: string }>,
  commonIndex: number,
  snapshotQueries: ReadonlyArray<{ revision: number; prefix: string }>,
): Promise<FinalLogs> {
  const logs: ReplicaLog[] = [];
  for (const r of replicas) logs.push(await readReplicaLog(r.id, r.dataDir, commonIndex));
  const problems: string[] = [];
  for (const l of logs)
    if (l.lastIndex < commonIndex) problems.push(`${l.id}: log ends at ${l.lastIndex}, below the common commit index ${commonIndex}`);
  // Identical where they overlap: same term, type and bytes at every index.
  const byIndex = new Map<number, { id: string; e: Entry }>();
  let mismatches = 0;
  for (const l of logs) {
    for (const e of l.entries) {
      const seen = byIndex.get(e.index);
      if (!seen) {
        byIndex.set(e.index, { id: l.id, e });
        continue;
      }
      if (seen.e.term !== e.term || seen.e.type !== e.type || Buffer.compare(Buffer.from(seen.e.data), Buffer.from(e.data)) !== 0) {
        if (mismatches++ < 20) problems.push(`entry ${e.index} differs: ${seen.id} has term ${seen.e.term}, ${l.id} has term ${e.term}`);
      }
    }
  }
  if (mismatches > 20) problems.push(`… ${mismatches - 20} more differing entries`);
  const summaries: Array<{ id: string; snapshotIndex: number; firstIndex: number; lastIndex: number; hash: string }> = [];
  const comparable = logs.filter((l) => {
    if (l.snapshotIndex <= commonIndex) return true;
    problems.push(`${l.id}: snapshot at ${l.snapshotIndex} is past the common index ${commonIndex}; its hash is not comparable`);
    return false;
  });
  assert(comparable.length > 0, 'at least one replica can be replayed to the common index');
  const canonical = comparable.reduce((best, l) => (l.firstIndex < best.firstIndex ? l : best));
  let canonicalReplay: Replay | undefined;
  for (const l of comparable) {
    const r = replay(l, l === canonical ? snapshotQueries : []);
    if (l === canonical) canonicalReplay = r;
    summaries.push({ id: l.id, snapshotIndex: l.snapshotIndex, firstIndex: l.firstIndex, lastIndex: l.lastIndex, hash: r.fsm.stateHash() });
  }
  const hashes = new Set(summaries.map((s) => s.hash));
  if (hashes.size > 1) problems.push(`state hashes differ at index ${commonIndex}: ${summaries.map((s) => `${s.id}=${s.hash}`).join(' ')}`);
  assert(canonicalReplay !== undefined, 'at least one replica replayed');
  return { commonIndex, replicas: summaries, problems, canonical, replay: canonicalReplay };
}

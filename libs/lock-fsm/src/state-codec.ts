/**
 * Canonical encoding of the state: the same state gives the same bytes on
 * every replica, so snapshots can be compared byte for byte and hashed.
 * Maps whose order carries no meaning (namespaces, sessions, locks) are
 * written sorted by key; lists whose order is meaning (holders in grant
 * order, FIFO waiters, dedupe records in arrival order) are written as they
 * are. Decoding checks every invariant and rejects any non-canonical order,
 * so restore(snapshot) always snapshots back to the same bytes.
 *
 * One namespace's part (its "section") is shared by snapshots and by
 * namespace export/import, which is how a tenant move carries sessions,
 * locks, queues and dedupe results together.
 *
 * Snapshot, format version 6:
 *   u8 version, varuint appliedIndex, varuint revisionBase, varuint namespaceCount,
 *   then per namespace (sorted): string name, u8 state, varuint lastRevision,
 *   and unless moved out, its quotas (varuint maxSessions, maxLocks,
 *   maxWaiters; 0 = none), its credentials (varuint count, per token hash
 *   newest first: string hash, varuint validUntilMs; 0 = no expiry) and its
 *   section; then varuint memberCount, per member
 *   (sorted by id): string id, string address, string peerAddress; then
 *   varuint stagedCount, per staged import (sorted by namespace): string
 *   namespace, varuint totalBytes, bytes staged so far; then varuint
 *   fenceCount, per move fence (sorted by namespace): string namespace,
 *   varuint term, string moveId.
 *   Version 5 (still read) is the same without the fences (none), version 4
 *   also without the credentials (none), version 3 also without the quotas
 *   (none), version 2 also without the staged imports, version 1 also
 *   without the members.
 * Export, format version 4:
 *   u8 version, string namespace, varuint highestRevision, varuint
 *   namespaceRevision (the last revision that changed the namespace: its
 *   freeze), quotas (as in a snapshot), u8 hasFence and if 1 the namespace's
 *   move fence (varuint term, string moveId), credentials (as in a
 *   snapshot), section. Version 3 (still read) has no fence and no
 *   credentials (none); version 2 also no quotas (none); version 1 (still
 *   read, from old logs) also has no namespaceRevision; it reads as
 *   highestRevision.
 * Section:
 *   varuint sessionCount, per session (sorted by id): string id, string clientId,
 *     varuint ttlMs, varuint openedRevision, varuint dedupeCount, per record
 *     (oldest first): string requestId, u8 status, string name, varuint token,
 *     varuint revision, u8 reason;
 *   varuint lockCount, per lock (sorted by name): string name, varuint delayRevision,
 *     varuint delayMs, varuint holderCount, per holder: string sessionId, varuint token,
 *     u8 mode, varuint lockDelayMs; varuint waiterCount, per waiter: string sessionId,
 *     u8 mode, string requestId, varuint waitMs, varuint lockDelayMs, varuint queuedRevision.
 */
import type { Namespace, RequestId, Revision, SessionId } from '@fencer/base';
import { isValidNamespace } from '@fencer/contract';
import { ByteReader, ByteWriter, DecodeError } from './codec.js';
import { decodeMode, encodeMode } from './commands.js';
import { MEMBERS_MAX, type FsmLimits } from './limits.js';
import { checkQuotas, readQuotas, writeQuotas, type NamespaceQuotas } from './quotas.js';
import { readFence, writeFence, type MoveFence } from './move-fence.js';
import { checkCredentials, readCredentials, writeCredentials, type NamespaceCredentials } from './credentials.js';
import {
  canHold,
  compareStrings,
  EMPTY,
  newNamespaceRecord,
  newSessionRecord,
  sortedKeys,
  type LockRecord,
  type NamespaceRecord,
  type SessionRecord,
} from './records.js';
import type { Holder, MemberAddress, NamespaceState, Waiter } from './types.js';
import { dedupeHash, REASON_CANCELLED, REASON_NONE, STATUS_QUEUED, type DedupeStatus } from './dedupe.js';
import {
  checkClientId,
  checkHostPort,
  checkLockDelayMs,
  checkMemberId,
  checkName,
  checkRequestId,
  checkSessionId,
  checkTtlMs,
  checkWaitMs,
} from './validate.js';

export const SNAPSHOT_FORMAT_VERSION = 6;
/** Versions decodeSnapshot reads: every one ever written (old snapshots stay on disk). */
export const SNAPSHOT_VERSIONS_READ: readonly number[] = [1, 2, 3, 4, 5, 6];
/** The first snapshot format with move fences. */
const SNAPSHOT_FENCES_SINCE = 6;
export const EXPORT_FORMAT_VERSION = 4;
/** Versions decodeExport reads: every one ever written (ImportNamespace entries stay in logs). */
const EXPORT_VERSIONS_READ = [1, 2, 3, 4];

/** An export arriving in pieces (StageImportChunk), kept until ImportStagedNamespace. */
export interface StagedImport {
  readonly totalBytes: number;
  /** The bytes received so far, from offset 0. */
  readonly chunks: Uint8Array[];
  received: number;
}

/** The staged pieces as one array. */
export function stagedBytes(staged: StagedImport): Uint8Array {
  if (staged.chunks.length === 1) return staged.chunks[0] as Uint8Array;
  const out = new Uint8Array(staged.received);
  let at = 0;
  for (const c of staged.chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

const NAMESPACE_STATE_CODES: Record<NamespaceState, number> = { active: 1, frozen: 2, moved: 3 };

function invalid(message: string): never {
  throw new DecodeError(message);
}

// ---- writing ----

export function writeSection(w: ByteWriter, ns: NamespaceRecord): void {
  const sessionIds = sortedKeys(ns.sessions);
  w.varuint(sessionIds.length);
  for (const id of sessionIds) {
    const s = ns.sessions.get(id) as SessionRecord;
    w.string(s.id).string(s.clientId).varuint(s.ttlMs).varuint(s.openedRevision).varuint(s.dedupe.size);
    const d = s.dedupe;
    for (let k = 0; k < d.size; k++) {
      // Arrival order, oldest first. The table's status and reason codes are the snapshot's.
      const slot = d.slotInArrivalOrder(k);
      w.string(d.requestIdAt(slot))
        .u8(d.statusCodeAt(slot))
        .string(d.nameAt(slot))
        .varuint(d.tokenAt(slot))
        .varuint(d.revisionAt(slot))
        .u8(d.reasonCodeAt(slot));
    }
  }
  const names = sortedKeys(ns.locks);
  w.varuint(names.length);
  for (const name of names) {
    const lock = ns.locks.get(name) as LockRecord;
    w.string(name).varuint(lock.delayRevision).varuint(lock.delayMs).varuint(lock.holders.length);
    for (const h of lock.holders) w.string(h.sessionId).varuint(h.token).u8(encodeMode(h.mode)).varuint(h.lockDelayMs);
    w.varuint(lock.waiters.length);
    for (const x of lock.waiters) {
      w.string(x.sessionId).u8(encodeMode(x.mode)).string(x.requestId).varuint(x.waitMs).varuint(x.lockDelayMs).varuint(x.queuedRevision);
    }
  }
}

export function encodeSnapshot(
  appliedIndex: number,
  revisionBase: number,
  namespaces: ReadonlyMap<string, NamespaceRecord>,
  members: ReadonlyMap<string, MemberAddress> = new Map(),
  staged: ReadonlyMap<string, StagedImport> = new Map(),
  fences: ReadonlyMap<string, MoveFence> = new Map(),
): Uint8Array {
  const w = new ByteWriter(4096);
  w.u8(SNAPSHOT_FORMAT_VERSION).varuint(appliedIndex).varuint(revisionBase);
  const names = sortedKeys(namespaces);
  w.varuint(names.length);
  for (const name of names) {
    const ns = namespaces.get(name) as NamespaceRecord;
    w.string(ns.name).u8(NAMESPACE_STATE_CODES[ns.state]).varuint(ns.lastRevision);
    if (ns.state !== 'moved') {
      writeQuotas(w, ns.quotas);
      writeCredentials(w, ns.credentials);
      writeSection(w, ns);
    }
  }
  const ids = sortedKeys(members);
  w.varuint(ids.length);
  for (const id of ids) {
    const m = members.get(id) as MemberAddress;
    w.string(id).string(m.address).string(m.peerAddress);
  }
  const stagedNames = sortedKeys(staged);
  w.varuint(stagedNames.length);
  for (const name of stagedNames) {
    const st = staged.get(name) as StagedImport;
    w.string(name).varuint(st.totalBytes).bytes(stagedBytes(st));
  }
  const fenced = sortedKeys(fences);
  w.varuint(fenced.length);
  for (const name of fenced) {
    w.string(name);
    writeFence(w, fences.get(name) as MoveFence);
  }
  return w.finish();
}

/** The namespace's export; `fence` is its move fence here, which the importing cell keeps (at least). */
export function encodeExport(ns: NamespaceRecord, highestRevision: number, fence?: MoveFence): Uint8Array {
  const w = new ByteWriter(4096);
  w.u8(EXPORT_FORMAT_VERSION).string(ns.name).varuint(highestRevision).varuint(ns.lastRevision);
  writeQuotas(w, ns.quotas);
  w.bool(fence !== undefined);
  if (fence !== undefined) writeFence(w, fence);
  writeCredentials(w, ns.credentials);
  writeSection(w, ns);
  return w.finish();
}

// ---- reading ----

function quotasChecked(r: ByteReader): NamespaceQuotas {
  const quotas = readQuotas(r);
  const bad = checkQuotas(quotas);
  if (bad !== undefined) invalid(bad.message);
  return quotas;
}

function credentialsChecked(r: ByteReader): NamespaceCredentials {
  const credentials = readCredentials(r);
  const bad = checkCredentials(credentials);
  if (bad !== undefined) invalid(bad.message);
  return credentials;
}

function checked<T>(problem: { message: string } | undefined, value: T): T {
  if (problem !== undefined) invalid(problem.message);
  return value;
}

function revisionIn(r: ByteReader, revisionMax: number, what: string, allowZero: boolean): number {
  const v = r.varuint();
  if (v > revisionMax || (!allowZero && v === 0)) invalid(`${what} ${v} outside [${allowZero ? 0 : 1}, ${revisionMax}]`);
  return v;
}

/**
 * Reads one namespace's section into `ns`, checking every invariant against
 * `limits`. Revisions must not exceed `revisionMax`. Throws DecodeError.
 * Returns the number of sessions read.
 */
export function readSection(r: ByteReader, ns: NamespaceRecord, limits: FsmLimits, revisionMax: number): number {
  const reader = new SectionReader(r, ns, limits, revisionMax);
  const sessionCount = reader.sessions();
  reader.locks();
  reader.checkQueuedRecords();
  return sessionCount;
}

/** One section, in the order it was written: sessions (each with its dedupe records), then locks. */
class SectionReader {
  /** Ordinal of the last lock each session appeared in: finds a session listed twice in one lock. */
  private readonly lastLockOf = new Map<string, number>();

  constructor(
    private readonly r: ByteReader,
    private readonly ns: NamespaceRecord,
    private readonly limits: FsmLimits,
    private readonly revisionMax: number,
  ) {}

  /** Sessions sorted by id; returns how many. */
  sessions(): number {
    const { r, ns, limits, revisionMax } = this;
    const sessionCount = r.count(limits.sessionsPerNamespaceMax, 'session count');
    let previousId = '';
    for (let i = 0; i < sessionCount; i++) {
      const id = r.string() as SessionId;
      checked(checkSessionId(id, ns.name), 0);
      if (i > 0 && compareStrings(previousId, id) >= 0) invalid(`sessions out of order: ${previousId} before ${id}`);
      previousId = id;
      const clientId = r.string();
      checked(checkClientId(clientId), 0);
      const ttlMs = r.varuint();
      checked(checkTtlMs(ttlMs), 0);
      const openedRevision = revisionIn(r, revisionMax, 'openedRevision', false) as Revision;
      const s = newSessionRecord(id, ns, clientId, ttlMs, openedRevision, limits.dedupePerSessionMax);
      const dedupeCount = r.count(limits.dedupePerSessionMax, 'dedupe count');
      for (let j = 0; j < dedupeCount; j++) this.dedupeRecord(s);
      ns.sessions.set(id, s);
    }
    return sessionCount;
  }

  /** One remembered outcome, oldest first; a reason comes with TIMED_OUT only, a token with GRANTED only. */
  private dedupeRecord(s: SessionRecord): void {
    const { r, revisionMax } = this;
    const requestId = r.string();
    checked(checkRequestId(requestId), 0);
    const h = dedupeHash(requestId);
    if (s.dedupe.find(requestId, h) >= 0) invalid(`duplicate request id ${requestId} in session ${s.id}`);
    const statusCode = r.u8();
    const status: DedupeStatus | undefined =
      statusCode === 1 ? 'GRANTED' : statusCode === 2 ? 'QUEUED' : statusCode === 3 ? 'TIMED_OUT' : undefined;
    if (status === undefined) invalid(`unknown dedupe status ${statusCode}`);
    const name = r.string();
    checked(checkName(name, this.ns.name), 0);
    const token = revisionIn(r, revisionMax, 'dedupe token', status !== 'GRANTED') as Revision;
    if (status !== 'GRANTED' && token !== 0) invalid('a dedupe record that is not GRANTED carries no token');
    const revision = revisionIn(r, revisionMax, 'dedupe revision', false) as Revision;
    const reason = r.u8();
    if (reason > REASON_CANCELLED) invalid(`unknown reason ${reason}`);
    if ((status === 'TIMED_OUT') !== (reason !== REASON_NONE)) invalid('a reason comes with TIMED_OUT and only with it');
    s.dedupe.add(requestId, h, statusCode, name, token, revision, reason);
  }

  /** Locks sorted by name, each with its holders in grant order and its FIFO waiters. */
  locks(): void {
    const { r, ns, limits, revisionMax } = this;
    const lockCount = r.varuint();
    let previousName = '';
    for (let i = 0; i < lockCount; i++) {
      const name = r.string();
      checked(checkName(name, ns.name), 0);
      if (i > 0 && compareStrings(previousName, name) >= 0) invalid(`locks out of order: ${previousName} before ${name}`);
      previousName = name;
      const delayRevision = revisionIn(r, revisionMax, 'delayRevision', true);
      const delayMs = r.varuint();
      if (delayRevision === 0 ? delayMs !== 0 : checkLockDelayMs(delayMs) !== undefined || delayMs === 0)
        invalid(`lock ${name}: bad lock-delay ${delayMs}`);
      const lock: LockRecord = { name, holders: EMPTY, waiters: EMPTY, delayRevision, delayMs };
      const holders = this.holders(lock, i);
      const waiters = this.waiters(lock, i);
      if (holders.length === 0 && waiters.length === 0 && delayRevision === 0) invalid(`lock ${name} is free but listed`);
      const head = waiters[0];
      if (head !== undefined && delayRevision === 0 && canHold(holders, head.mode, limits.holdersPerLockMax)) {
        invalid(`lock ${name}: the head waiter could be granted (promotion did not run)`);
      }
      lock.holders = holders.length === 0 ? EMPTY : holders;
      lock.waiters = waiters.length === 0 ? EMPTY : waiters;
      ns.locks.set(name, lock);
    }
  }

  /** The session of a holder or waiter of the lock at `ordinal`, listed there once. */
  private member(lock: LockRecord, ordinal: number, role: 'holder' | 'waiter'): SessionRecord {
    const sessionId = this.r.string() as SessionId;
    const s = this.ns.sessions.get(sessionId) ?? invalid(`lock ${lock.name}: ${role} ${sessionId} is not a session of ${this.ns.name}`);
    if (this.lastLockOf.get(sessionId) === ordinal) {
      invalid(`lock ${lock.name}: session ${sessionId} ${role === 'holder' ? 'holds it twice' : 'waits while holding or waits twice'}`);
    }
    this.lastLockOf.set(sessionId, ordinal);
    s.lockList.push(lock);
    s.lockListLength++;
    return s;
  }

  private holders(lock: LockRecord, ordinal: number): Holder[] {
    const { r, limits, revisionMax } = this;
    const holderCount = r.count(limits.holdersPerLockMax, 'holder count');
    const holders: Holder[] = [];
    for (let j = 0; j < holderCount; j++) {
      const s = this.member(lock, ordinal, 'holder');
      const token = revisionIn(r, revisionMax, 'token', false) as Revision;
      const mode = decodeModeChecked(r.u8());
      const lockDelayMs = r.varuint();
      checked(checkLockDelayMs(lockDelayMs), 0);
      if (holders.length > 0 && (mode === 'EXCLUSIVE' || (holders[0] as Holder).mode === 'EXCLUSIVE'))
        invalid(`lock ${lock.name}: an exclusive holder must be alone`);
      holders.push({ sessionId: s.id, clientId: s.clientId, mode, token, lockDelayMs });
      s.heldCount++;
    }
    return holders;
  }

  private waiters(lock: LockRecord, ordinal: number): Waiter[] {
    const { r, limits, revisionMax } = this;
    const waiterCount = r.count(limits.waitersPerLockMax, 'waiter count');
    const waiters: Waiter[] = [];
    for (let j = 0; j < waiterCount; j++) {
      const s = this.member(lock, ordinal, 'waiter');
      const mode = decodeModeChecked(r.u8());
      const requestId = r.string() as RequestId;
      checked(checkRequestId(requestId), 0);
      const waitMs = r.varuint();
      checked(checkWaitMs(waitMs), 0);
      const lockDelayMs = r.varuint();
      checked(checkLockDelayMs(lockDelayMs), 0);
      const queuedRevision = revisionIn(r, revisionMax, 'queuedRevision', false) as Revision;
      waiters.push({ sessionId: s.id, clientId: s.clientId, mode, requestId, waitMs, lockDelayMs, queuedRevision });
      s.waitingCount++;
      this.ns.waiterCount++;
    }
    return waiters;
  }

  /** Every session within its limit, and every QUEUED record still has its waiter. */
  checkQueuedRecords(): void {
    const { ns, limits } = this;
    for (const s of ns.sessions.values()) {
      if (s.heldCount + s.waitingCount > limits.locksPerSessionMax) invalid(`session ${s.id} exceeds locksPerSessionMax`);
      const d = s.dedupe;
      for (let slot = 0; slot < d.size; slot++) {
        if (d.statusCodeAt(slot) !== STATUS_QUEUED) continue;
        const requestId = d.requestIdAt(slot);
        const name = d.nameAt(slot);
        const waiter = ns.locks.get(name)?.waiters.find((x) => x.sessionId === s.id);
        if (waiter?.requestId !== requestId) invalid(`session ${s.id}: QUEUED request ${requestId} has no waiter in ${name}`);
      }
    }
  }
}

function decodeModeChecked(code: number): Holder['mode'] {
  if (code !== 1 && code !== 2) invalid(`unknown lock mode ${code}`);
  return decodeMode(code);
}

export interface DecodedSnapshot {
  readonly appliedIndex: number;
  readonly revisionBase: number;
  readonly namespaces: Map<string, NamespaceRecord>;
  readonly sessionCount: number;
  readonly members: Map<string, MemberAddress>;
  readonly staged: Map<string, StagedImport>;
  readonly fences: Map<string, MoveFence>;
}

/** Throws DecodeError on anything malformed or inconsistent. */
export function decodeSnapshot(bytes: Uint8Array, limits: FsmLimits): DecodedSnapshot {
  const r = new ByteReader(bytes);
  const version = r.u8();
  if (!SNAPSHOT_VERSIONS_READ.includes(version)) invalid(`unknown snapshot format version ${version}`);
  const appliedIndex = r.varuint();
  const revisionBase = r.varuint();
  const revisionMax = appliedIndex + revisionBase;
  if (!Number.isSafeInteger(revisionMax)) invalid('revision overflows');
  const count = r.count(limits.namespacesMax, 'namespace count');
  const namespaces = new Map<string, NamespaceRecord>();
  let sessionCount = 0;
  let previous = '';
  for (let i = 0; i < count; i++) {
    const name = r.string() as Namespace;
    if (!isValidNamespace(name)) invalid(`invalid namespace ${name}`);
    if (i > 0 && compareStrings(previous, name) >= 0) invalid(`namespaces out of order: ${previous} before ${name}`);
    previous = name;
    const stateCode = r.u8();
    const state: NamespaceState | undefined =
      stateCode === 1 ? 'active' : stateCode === 2 ? 'frozen' : stateCode === 3 ? 'moved' : undefined;
    if (state === undefined) invalid(`unknown namespace state ${stateCode}`);
    const lastRevision = revisionIn(r, revisionMax, 'lastRevision', true);
    const ns = newNamespaceRecord(name, state, lastRevision);
    if (state !== 'moved' && version >= 4) ns.quotas = quotasChecked(r);
    if (state !== 'moved' && version >= 5) ns.credentials = credentialsChecked(r);
    if (state !== 'moved') sessionCount += readSection(r, ns, limits, revisionMax);
    namespaces.set(name, ns);
  }
  if (sessionCount > limits.sessionsMax) invalid(`snapshot holds ${sessionCount} sessions, more than sessionsMax`);
  const members = new Map<string, MemberAddress>();
  if (version >= 2) {
    const memberCount = r.count(MEMBERS_MAX, 'member count');
    let previousId = '';
    for (let i = 0; i < memberCount; i++) {
      const id = r.string();
      if (i > 0 && compareStrings(previousId, id) >= 0) invalid(`members out of order: ${previousId} before ${id}`);
      previousId = id;
      const address = r.string();
      const peerAddress = r.string();
      if (checkMemberId(id) ?? checkHostPort(address, 'address') ?? checkHostPort(peerAddress, 'peer address'))
        invalid(`invalid member ${id} at ${address} / ${peerAddress}`);
      members.set(id, { address, peerAddress });
    }
  }
  const staged = version >= 3 ? readStaged(r, limits) : new Map<string, StagedImport>();
  const fences = version >= SNAPSHOT_FENCES_SINCE ? readFences(r, limits) : new Map<string, MoveFence>();
  r.end();
  return { appliedIndex, revisionBase, namespaces, sessionCount, members, staged, fences };
}

/** The most move fences a cell keeps: one per namespace record, and as many for namespaces a move's drop found absent. */
export function fencesMax(limits: FsmLimits): number {
  return 2 * limits.namespacesMax;
}

function readFences(r: ByteReader, limits: FsmLimits): Map<string, MoveFence> {
  const fences = new Map<string, MoveFence>();
  const count = r.count(fencesMax(limits), 'move fence count');
  let previous = '';
  for (let i = 0; i < count; i++) {
    const name = r.string();
    if (!isValidNamespace(name)) invalid(`invalid fenced namespace ${name}`);
    if (i > 0 && compareStrings(previous, name) >= 0) invalid(`move fences out of order: ${previous} before ${name}`);
    previous = name;
    fences.set(name, readFence(r));
  }
  return fences;
}

function readStaged(r: ByteReader, limits: FsmLimits): Map<string, StagedImport> {
  const staged = new Map<string, StagedImport>();
  const count = r.count(limits.namespacesMax, 'staged import count');
  let previous = '';
  let held = 0;
  for (let i = 0; i < count; i++) {
    const name = r.string();
    if (!isValidNamespace(name)) invalid(`invalid staged namespace ${name}`);
    if (i > 0 && compareStrings(previous, name) >= 0) invalid(`staged imports out of order: ${previous} before ${name}`);
    previous = name;
    const totalBytes = r.varuint();
    const data = r.bytes();
    held += totalBytes;
    if (data.length === 0 || data.length > totalBytes || held > limits.importBytesMax)
      invalid(`staged import of ${name}: ${data.length} of ${totalBytes} bytes, ${held} staged in all`);
    staged.set(name, { totalBytes, chunks: [data], received: data.length });
  }
  return staged;
}

export interface DecodedExport {
  readonly namespace: Namespace;
  readonly highestRevision: number;
  /** The last revision that changed the namespace before its export (its freeze); at most highestRevision. */
  readonly namespaceRevision: number;
  /** A record in state 'active' holding the section; the importer sets state and lastRevision. */
  readonly record: NamespaceRecord;
  readonly sessionCount: number;
  /** The namespace's move fence on the exporting cell (format 4 on). */
  readonly fence: MoveFence | undefined;
}

/** Throws DecodeError on anything malformed or inconsistent. */
export function decodeExport(bytes: Uint8Array, limits: FsmLimits): DecodedExport {
  const r = new ByteReader(bytes);
  const version = r.u8();
  if (!EXPORT_VERSIONS_READ.includes(version)) invalid(`unknown export format version ${version}`);
  const namespace = r.string() as Namespace;
  if (!isValidNamespace(namespace)) invalid(`invalid namespace ${namespace}`);
  const highestRevision = r.varuint();
  const namespaceRevision = version >= 2 ? r.varuint() : highestRevision;
  if (namespaceRevision > highestRevision) invalid(`namespace revision ${namespaceRevision} above the export's ${highestRevision}`);
  const record = newNamespaceRecord(namespace, 'active', highestRevision);
  if (version >= 3) record.quotas = quotasChecked(r);
  const fence = version >= 4 && r.bool() ? readFence(r) : undefined;
  if (version >= 4) record.credentials = credentialsChecked(r);
  const sessionCount = readSection(r, record, limits, highestRevision);
  r.end();
  return { namespace, highestRevision, namespaceRevision, record, sessionCount, fence };
}

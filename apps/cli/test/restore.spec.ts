/**
 * Goal: `fencer cell restore` builds replica folders a cell node recovers
 * from, only from a snapshot whose bytes match its manifest: the new
 * replicas are the voters and the member directory, the revision base is
 * raised by (age + 1 h) × 100,000/s + 1,000,000 or by --bump-revision, the
 * lock table is as it was; a corrupted object, a snapshot of another cell,
 * a folder already in use and a bad --replicas are refused with a message,
 * and nothing is written.
 * Method: a real replica snapshot file (a LockStateMachine's state saved
 * through @fencer/wal's store on disk), published to s3rver (a child
 * process) with @fencer/object-store; restoreCell run in-process; its
 * folders reopened with the WAL store and the state machine restored from
 * them, as a cell node does at start.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LogIndex, Namespace, NodeId, RequestId, SessionId, Term } from '@fencer/base';
import { LockStateMachine, NOOP } from '@fencer/lock-fsm';
import { publishSnapshot, SnapshotIntegrityError, snapshotKey, type ObjectStore } from '@fencer/object-store';
import { S3RVER_CREDENTIALS, startS3rver, type S3rverProcess } from '@fencer/object-store/testing';
import { openRaftLogStore, type WalStore } from '@fencer/wal';
import { NodeDisk } from '@fencer/wal/node';
import { parseReplicas } from '../src/commands/cell-restore.js';
import { defaultRevisionRaise, restoreCell, RestoreError, type RestoreRequest } from '../src/restore/restore.js';

const CREATED_MS = Date.parse('2026-12-01T10:00:00Z');
const NOW_MS = CREATED_MS + 10 * 60_000;
const INDEX = 7;

let dir = '';
let s3: S3rverProcess;
let store: ObjectStore;
let fileBytes: Buffer;
let lockState: LockStateMachine;

function opened(d: string): Promise<WalStore> {
  return new Promise((resolve, reject) => openRaftLogStore(new NodeDisk(), d, {}, (e, s) => (e || !s ? reject(e) : resolve(s))));
}
const completed = (run: (done: (err: Error | null) => void) => void): Promise<void> =>
  new Promise((resolve, reject) => run((err) => (err ? reject(err) : resolve())));

/** A replica's snapshot file of a lock table with one held lock, as the replica writes it. */
async function replicaSnapshotFile(): Promise<Buffer> {
  lockState = new LockStateMachine({ autoClaim: true });
  const sessionId = SessionId('demo:s1');
  lockState.apply(1, { kind: 'SetMemberAddress', id: 'old-1', address: '10.0.0.1:7001', peerAddress: '10.0.0.1:7301' });
  lockState.apply(2, { kind: 'OpenSession', sessionId, clientId: 'c', namespace: Namespace('demo'), ttlMs: 10_000 });
  lockState.apply(5, {
    kind: 'Acquire',
    sessionId,
    name: '/ls/demo/a',
    mode: 'EXCLUSIVE',
    requestId: RequestId('r1'),
    waitMs: 0,
    lockDelayMs: 0,
    tryLock: true,
  });
  lockState.apply(INDEX, NOOP);
  const walDir = path.join(dir, 'replica-wal');
  const wal = await opened(walDir);
  const snapshot = {
    meta: { index: LogIndex(INDEX), term: Term(3), conf: { voters: ['old-1', 'old-2', 'old-3'].map(NodeId), learners: [] } },
    data: lockState.snapshot(),
  };
  await completed((done) => wal.saveSnapshot(snapshot, done));
  await completed((done) => wal.close(done));
  return readFileSync(
    path.join(
      walDir,
      readdirSync(walDir).find((n) => n.endsWith('.snap'))!,
    ),
  );
}

const replicas = parseReplicas('n1=127.0.0.1:9101,n2=127.0.0.1:9102,n3=127.0.0.1:9103', 300);
const request = (dataDir: string, extra: Partial<RestoreRequest> = {}): RestoreRequest => ({
  from: store.locationOf(snapshotKey('cell-1', INDEX, 3)),
  cell: 'cell-1',
  dataDir: path.join(dir, dataDir),
  replicas,
  s3: { endpoint: s3.endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS },
  nowMs: NOW_MS,
  ...extra,
});
const info = (bytes: number) => ({
  cell: 'cell-1',
  index: INDEX,
  term: 3,
  voters: ['old-1', 'old-2', 'old-3'],
  learners: [],
  revisionBase: 0,
  lastRevision: INDEX,
  bytes,
});

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-restore-'));
  s3 = await startS3rver(path.join(dir, 's3rver'));
  store = s3.store('backups');
  fileBytes = await replicaSnapshotFile();
  await publishSnapshot(store, info(fileBytes.length), Readable.from([fileBytes]), CREATED_MS);
}, 60_000);
afterAll(async () => {
  store?.close();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('fencer cell restore', () => {
  it('writes folders a replica recovers from: new voters and members, the raised base, the same lock table', async () => {
    const result = await restoreCell(request('ok'));
    const raise = defaultRevisionRaise(CREATED_MS, NOW_MS);
    expect(raise).toBe((600 + 3600) * 100_000 + 1_000_000);
    expect(result.revisionBase).toEqual({ before: 0, after: raise });
    for (const r of replicas) {
      const wal = await opened(path.join(dir, 'ok', r.id));
      const snap = wal.snapshot();
      expect(snap.meta).toEqual({ index: INDEX, term: 3, conf: { voters: ['n1', 'n2', 'n3'], learners: [] } });
      expect(wal.initialState().hardState).toEqual({ term: 3, vote: null, commit: INDEX });
      const fsm = LockStateMachine.restore(snap.data, { autoClaim: true });
      expect(fsm.revisionBase).toBe(raise);
      expect(fsm.revision).toBe(INDEX + raise);
      expect(fsm.getLock('/ls/demo/a')).toEqual(lockState.getLock('/ls/demo/a'));
      expect([...fsm.members()]).toEqual(replicas.map((x) => [x.id, { address: x.address, peerAddress: x.peerAddress }]));
      await completed((done) => wal.close(done));
    }
  });

  it('--bump-revision overrides the raise; a store root restores the cell newest snapshot', async () => {
    const result = await restoreCell(request('bumped', { from: store.url, bumpRevision: 42 }));
    expect(result.revisionBase.after).toBe(42);
    expect(result.manifest.index).toBe(INDEX);
  });

  it('detects a corrupted object and writes nothing', async () => {
    const flipped = Buffer.from(fileBytes);
    flipped[flipped.length - 10] ^= 0xff;
    const other = s3.store('corrupt');
    await publishSnapshot(other, info(fileBytes.length), Readable.from([fileBytes]), CREATED_MS);
    await other.put(snapshotKey('cell-1', INDEX, 3), flipped);
    await expect(restoreCell(request('corrupt', { from: other.locationOf(snapshotKey('cell-1', INDEX, 3)) }))).rejects.toThrow(
      SnapshotIntegrityError,
    );
    expect(existsSync(path.join(dir, 'corrupt'))).toBe(false);
    other.close();
  });

  it('refuses a snapshot of another cell, a folder in use, and a bad replica list', async () => {
    await expect(
      restoreCell(request('wrong', { cell: 'cell-2', from: store.locationOf(snapshotKey('cell-1', INDEX, 3)) })),
    ).rejects.toThrow(/is a snapshot of cell cell-1, not cell-2/);
    mkdirSync(path.join(dir, 'busy', 'n2'), { recursive: true });
    writeFileSync(path.join(dir, 'busy', 'n2', 'something'), 'x');
    await expect(restoreCell(request('busy'))).rejects.toThrow(RestoreError);
    expect(existsSync(path.join(dir, 'busy', 'n1'))).toBe(false);
    expect(() => parseReplicas('n1=nowhere', 300)).toThrow(/is not id=host:port/);
    expect(() => parseReplicas('n1=h:1,n1=h:2', 300)).toThrow(/twice/);
    await expect(restoreCell(request('none', { from: s3.store('empty').url }))).rejects.toThrow(/no snapshot of cell cell-1/);
  });
});

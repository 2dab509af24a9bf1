/**
 * Admin ReadSnapshot: this replica's latest snapshot file, streamed as it is
 * on disk (libs/wal's format), for the control plane's uploads to object
 * storage (docs/decisions/0014-snapshots-in-object-storage.md).
 *
 * Memory stays bounded on this path: the file is read in chunks and the
 * next chunk is read only once gRPC has taken the previous one (the stream's
 * backpressure), so a slow reader holds the replica's memory to a few
 * chunks. The file is opened before anything is sent: a newer snapshot may
 * replace it and compaction may delete it meanwhile, but an open file's
 * bytes stay readable until it is closed.
 *
 * The replica's latest snapshot is known before its file is durable (the
 * store writes it in the background); a read that comes that early waits
 * for the file, at most `snapshotFileWaitMs`.
 */
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import path from 'node:path';
import type { ServerWritableStream } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { readSnapshotHead } from '@fencer/lock-fsm';
import { type adminpb, toServiceError } from '@fencer/protocol';
import type { Snapshot } from '@fencer/raft';
import { snapshotFileName } from '@fencer/wal';
import type { CellNode } from './node.js';

/** Bytes per chunk: well under gRPC's default 4 MiB message limit on the reading side. */
export const snapshotChunkBytes = 1024 * 1024;
/** How long a read waits for the latest snapshot's file to appear (the store writes it after taking it). */
export const snapshotFileWaitMs = 10_000;
const FILE_POLL_MS = 50;

type Call = ServerWritableStream<adminpb.ReadSnapshotRequest, adminpb.SnapshotChunk>;

/** The latest snapshot and its open file, or a FencerError saying why there is none to read. */
async function openLatest(node: CellNode, wanted: number): Promise<{ snapshot: Snapshot; file: FileHandle }> {
  const untilMs = Date.now() + snapshotFileWaitMs;
  for (;;) {
    const snapshot = node.store.snapshot();
    const index = snapshot.meta.index;
    if (index === 0) throw new FencerError('NOT_FOUND', 'this replica has no snapshot yet; take one first (admin TakeSnapshot)');
    if (wanted !== 0 && wanted !== index)
      throw new FencerError('NOT_FOUND', `snapshot ${wanted} is not this replica's latest (${index}); ask for 0 or ${index}`);
    try {
      return { snapshot, file: await open(path.join(node.config.dataDir, snapshotFileName(index)), 'r') };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      if (Date.now() > untilMs)
        throw new FencerError('DEADLINE_EXCEEDED', `the file of snapshot ${index} did not appear within ${snapshotFileWaitMs} ms`);
      await new Promise((r) => setTimeout(r, FILE_POLL_MS));
    }
  }
}

function infoOf(node: CellNode, snapshot: Snapshot, bytes: number): adminpb.SnapshotInfo {
  const head = readSnapshotHead(snapshot.data);
  return {
    cellId: node.config.cellId,
    index: snapshot.meta.index,
    term: snapshot.meta.term,
    bytes,
    voters: [...snapshot.meta.conf.voters],
    learners: [...snapshot.meta.conf.learners],
    revisionBase: head.revisionBase,
    lastRevision: head.lastRevision,
  };
}

/** Resolves once the stream may take more (its buffer drained), or the call ended. */
function drained(call: Call): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      call.off('drain', done);
      call.off('cancelled', done);
      call.off('close', done);
      resolve();
    };
    call.once('drain', done);
    call.once('cancelled', done);
    call.once('close', done);
  });
}

async function stream(node: CellNode, call: Call): Promise<void> {
  const { snapshot, file } = await openLatest(node, call.request.index);
  let cancelled = false;
  call.once('cancelled', () => (cancelled = true));
  try {
    const bytes = (await file.stat()).size;
    const info = infoOf(node, snapshot, bytes);
    const buffer = Buffer.allocUnsafe(snapshotChunkBytes);
    let position = 0;
    let first = true;
    while (!cancelled && (first || position < bytes)) {
      const { bytesRead } = await file.read(buffer, 0, Math.min(snapshotChunkBytes, bytes - position), position);
      if (bytesRead === 0 && position < bytes) throw new FencerError('INTERNAL', `snapshot file ended at ${position} of ${bytes} bytes`);
      position += bytesRead;
      // A copy per chunk: gRPC serialises later, and the buffer is refilled at once.
      const more = call.write({ info: first ? info : undefined, data: Buffer.from(buffer.subarray(0, bytesRead)) });
      first = false;
      if (!more) await drained(call);
    }
    if (!cancelled) call.end();
  } finally {
    await file.close();
  }
}

export function readSnapshotHandler(node: CellNode): (call: Call) => void {
  return (call) => {
    stream(node, call).catch((e: unknown) => {
      const fe = e instanceof FencerError ? e : new FencerError('INTERNAL', (e as Error)?.message ?? String(e));
      if (!(e instanceof FencerError)) node.env.logger.error({ err: (e as Error)?.stack }, 'ReadSnapshot failed');
      // grpc-js ends a server stream with a status when the handler emits 'error' with one.
      call.emit('error', toServiceError(fe));
    });
  };
}

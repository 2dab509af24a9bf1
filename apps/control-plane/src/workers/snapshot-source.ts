/**
 * Where the snapshot task gets a cell's snapshot: the cell leader's admin
 * API. TakeSnapshot there first, so the snapshot covers every write the
 * cell acknowledged before the request; then ReadSnapshot of the latest on
 * the same replica, streamed (apps/cell-node read-snapshot.ts).
 *
 * The stream is handed on as a Node Readable with its backpressure intact:
 * grpc-js stops reading from the replica while the upload has not taken
 * the previous chunks, so memory stays bounded whatever the snapshot's size.
 */
import { PassThrough, type Readable } from 'node:stream';
import { type ChannelCredentials, credentials, Metadata, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import type { SnapshotInfo } from '@fencer/object-store';
import { adminpb } from '@fencer/protocol';
import type { CellDirectory, CellPlan } from '../cells.js';

/** A cell's latest snapshot: what it is, and its bytes. */
export interface SnapshotStream {
  readonly info: SnapshotInfo;
  readonly body: Readable;
}

/** The seam the snapshot task reads cells through; tests pass a fake. */
export interface SnapshotSource {
  /** A fresh snapshot of `cell`, as a stream. Rejects when no replica of the cell gives one. */
  read(cell: string, signal: AbortSignal): Promise<SnapshotStream>;
  close(): void;
}

/** A TakeSnapshot waits for the snapshot to be durable; a big one takes a while. */
const takeSnapshotTimeoutMs = 120_000;
/** Until the first chunk arrives (the replica opens the file, which may wait for it to be written). */
const firstChunkTimeoutMs = 30_000;

function takeSnapshot(client: adminpb.CellAdminClient): Promise<adminpb.TakeSnapshotResponse> {
  return new Promise((resolve, reject) =>
    client.takeSnapshot({}, new Metadata(), { deadline: Date.now() + takeSnapshotTimeoutMs }, (e: ServiceError | null, r) =>
      e ? reject(e) : resolve(r),
    ),
  );
}

function infoOf(cell: string, m: adminpb.SnapshotInfo): SnapshotInfo {
  return {
    cell,
    index: m.index,
    term: m.term,
    voters: m.voters,
    learners: m.learners,
    revisionBase: m.revisionBase,
    lastRevision: m.lastRevision,
    bytes: m.bytes,
  };
}

/** Resolves with the first chunk's info and a stream of every chunk's bytes. */
function streamOf(cell: string, call: ClientReadableStream<adminpb.SnapshotChunk>, signal: AbortSignal): Promise<SnapshotStream> {
  return new Promise((resolve, reject) => {
    const body = new PassThrough({ highWaterMark: 4 * 1024 * 1024 });
    const timer = setTimeout(() => call.cancel(), firstChunkTimeoutMs);
    const onAbort = (): void => call.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    let first = true;
    call.on('data', (chunk: adminpb.SnapshotChunk) => {
      if (first) {
        first = false;
        clearTimeout(timer);
        if (chunk.info === undefined) {
          call.cancel();
          return reject(new Error(`cell ${cell}'s first snapshot chunk carries no info`));
        }
        resolve({ info: infoOf(cell, chunk.info), body });
      }
      if (!body.write(chunk.data)) {
        call.pause();
        body.once('drain', () => call.resume());
      }
    });
    call.on('end', () => {
      clearTimeout(timer);
      if (first) reject(new Error(`cell ${cell} ended the snapshot stream before its first chunk`));
      body.end();
    });
    call.on('error', (err) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      if (first) reject(err);
      else body.destroy(err);
    });
    call.on('status', () => signal.removeEventListener('abort', onAbort));
    body.on('close', () => call.cancel());
  });
}

/** Reads snapshots from the cells' replicas over their admin API. */
export class GrpcSnapshotSource implements SnapshotSource {
  private readonly clients = new Map<string, { id: string; client: adminpb.CellAdminClient }[]>();

  constructor(
    plans: readonly CellPlan[],
    private readonly cells: CellDirectory,
    cellCredentials: ChannelCredentials = credentials.createInsecure(),
  ) {
    for (const plan of plans) {
      this.clients.set(
        plan.id,
        plan.replicas.map((r) => ({
          id: r.id,
          client: new adminpb.CellAdminClient(r.admin, cellCredentials, {
            'grpc.max_receive_message_length': 16 * 1024 * 1024,
          }),
        })),
      );
    }
  }

  async read(cell: string, signal: AbortSignal): Promise<SnapshotStream> {
    const replicas = this.clients.get(cell);
    if (replicas === undefined) throw new Error(`no cell "${cell}" in this control plane's cell list`);
    const leader = this.cells.status().find((c) => c.id === cell)?.leader;
    // The leader first: its snapshot covers every write acknowledged before this request.
    const ordered = [...replicas].sort((a, b) => Number(b.id === leader) - Number(a.id === leader));
    let last = '';
    for (const r of ordered) {
      signal.throwIfAborted();
      try {
        await takeSnapshot(r.client);
        return await streamOf(cell, r.client.readSnapshot({ index: 0 }), signal);
      } catch (err) {
        last = `${r.id}: ${(err as Error).message}`;
      }
    }
    throw new Error(`no replica of cell ${cell} gave a snapshot (last: ${last})`);
  }

  close(): void {
    for (const r of [...this.clients.values()].flat()) r.client.close();
  }
}

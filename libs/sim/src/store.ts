/**
 * The disk under each simulated node and the store opened over it. The
 * simulator routes every completion through `schedule`, so the disk's
 * latency is virtual time and a paused or crashed node's completions wait
 * or vanish with it.
 */
import type { Random } from '@fencer/base';
import { type MemDiskOp, type RaftLogStore, MemDisk, openRaftLogStore } from '@fencer/wal';
import { gaussian } from './network.js';
import { ModelDisk } from './model-store.js';

export type DiskOp = 'write' | 'sync' | 'meta';
export type DiskSchedule = (op: DiskOp, delayMs: number, fn: () => void) => void;

export interface SimDisk {
  /** A power cut: unsynced data is lost (or partly kept, the last write maybe torn). */
  crash(random: Random): void;
  /** The next fsync fails (the replica must stop and never retry it). */
  failNextSync(): void;
}

/** Log-normal fsync latency around `fsyncMs`. */
export function fsyncLatencyMs(random: Random, fsyncMs: number): number {
  return fsyncMs * Math.exp(0.5 * gaussian(random));
}

class ModelSimDisk implements SimDisk {
  readonly model: ModelDisk;

  constructor(random: Random, schedule: DiskSchedule, fsyncMs: number) {
    this.model = new ModelDisk(
      (delayMs, fn) => schedule(delayMs === 0.05 ? 'meta' : 'sync', delayMs, fn),
      () => fsyncLatencyMs(random, fsyncMs),
    );
  }

  crash(random: Random): void {
    this.model.crash(random);
  }

  failNextSync(): void {
    this.model.failNextSync = true;
  }
}

/** The production store (`@fencer/wal`) over its in-memory disk: segments, checksums, torn tails and all. */
class WalSimDisk implements SimDisk {
  readonly disk: MemDisk;

  constructor(random: Random, schedule: DiskSchedule, fsyncMs: number) {
    this.disk = new MemDisk({
      schedule: (delayMs, fn) => schedule('write', delayMs, fn),
      delayMs: (op: MemDiskOp) => memDiskLatencyMs(op, random, fsyncMs),
    });
  }

  crash(random: Random): void {
    // Mostly a random cut: a prefix of the unsynced writes lands, the next maybe torn, or (a quarter of
    // those) a random subset of them, as when the disk flushed pages out of order. Sometimes all is lost.
    const x = random.float();
    if (x < 0.55) this.disk.crash({ mode: 'random', random, tearChance: 0.5 });
    else if (x < 0.75) this.disk.crash({ mode: 'random', random, tearChance: 0.5, reorder: true });
    else this.disk.crash({ mode: 'lose' });
  }

  failNextSync(): void {
    this.disk.failNext('sync');
  }
}

function memDiskLatencyMs(op: MemDiskOp, random: Random, fsyncMs: number): number {
  switch (op) {
    case 'sync':
    case 'syncDir':
      return fsyncLatencyMs(random, fsyncMs);
    case 'allocate':
      return 0.2;
    default:
      return 0.02;
  }
}

export type StoreKind = 'wal' | 'model';

/** Small segments, so a run rolls and deletes many and preallocation costs little memory. */
const simSegmentBytes = 32 * 1024;
const storeDir = '/data/raft';

export function createSimDisk(kind: StoreKind, random: Random, schedule: DiskSchedule, fsyncMs: number): SimDisk {
  return kind === 'wal' ? new WalSimDisk(random, schedule, fsyncMs) : new ModelSimDisk(random, schedule, fsyncMs);
}

export function openSimStore(disk: SimDisk, done: (err: Error | null, store?: RaftLogStore) => void): void {
  if (disk instanceof WalSimDisk) {
    openRaftLogStore(disk.disk, storeDir, { segmentBytesMax: simSegmentBytes, snapshotsKept: 2 }, done);
  } else {
    (disk as ModelSimDisk).model.open(done);
  }
}

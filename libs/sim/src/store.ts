/**
 * The disk under each simulated node and the store opened over it. The
 * simulator routes every completion through `schedule`, so the disk's
 * latency is virtual time and a paused or crashed node's completions wait
 * or vanish with it.
 */
import type { Random } from '@fencer/base';
import type { RaftLogStore } from '@fencer/wal';
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

export function createSimDisk(random: Random, schedule: DiskSchedule, fsyncMs: number): SimDisk {
  return new ModelSimDisk(random, schedule, fsyncMs);
}

export function openSimStore(disk: SimDisk, done: (err: Error | null, store?: RaftLogStore) => void): void {
  (disk as ModelSimDisk).model.open(done);
}

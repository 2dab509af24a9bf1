/** Shared helpers for the WAL tests: drive MemDisk's completion queue to run callback APIs to the end. */
import { LogIndex, NodeId, Term } from '@fencer/base';
import type { Entry, HardState, Snapshot } from '@fencer/raft';
import { type MemDisk, type WalOptions, type WalStore, openRaftLogStore } from '../src/index.js';

export const DIR = '/data/wal';
/** Small segments: tests roll often, and MemDisk reads stay cheap. */
export const SMALL: WalOptions = { segmentBytesMax: 64 * 1024 };

export function entry(index: number, term: number, text = `e${index}`): Entry {
  const data = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) data[i] = text.charCodeAt(i);
  return { index: LogIndex(index), term: Term(term), type: 0, data };
}

export function hs(term: number, vote: string | null, commit: number): HardState {
  return { term: Term(term), vote: vote === null ? null : NodeId(vote), commit: LogIndex(commit) };
}

export function snapshotAt(index: number, term: number, text = `state@${index}`): Snapshot {
  return {
    meta: { index: LogIndex(index), term: Term(term), conf: { voters: [NodeId('a'), NodeId('b'), NodeId('c')], learners: [] } },
    data: Uint8Array.from(text, (c) => c.charCodeAt(0)),
  };
}

/** Opens a store on a MemDisk without a scheduler; returns the store or the error. */
export function open(disk: MemDisk, options: WalOptions = SMALL, dir = DIR): { store?: WalStore; err?: Error } {
  let result: { store?: WalStore; err?: Error } | null = null;
  openRaftLogStore(disk, dir, options, (err, store) => {
    result = err === null ? { store: store! } : { err };
  });
  disk.runPending();
  if (result === null) throw new Error('open did not complete after draining the disk queue');
  return result;
}

export function openOk(disk: MemDisk, options: WalOptions = SMALL, dir = DIR): WalStore {
  const r = open(disk, options, dir);
  if (r.err !== undefined) throw r.err;
  return r.store!;
}

/** Runs a callback operation to completion; returns its error. */
export function run(disk: MemDisk, start: (done: (err: Error | null) => void) => void): Error | null {
  let result: Error | null | undefined;
  start((err) => {
    result = err;
  });
  disk.runPending();
  if (result === undefined) throw new Error('operation did not complete after draining the disk queue');
  return result;
}

export function text(e: Entry): string {
  return String.fromCharCode(...e.data);
}

export function allEntries(store: WalStore): Entry[] {
  const lo = store.firstIndex();
  const hi = LogIndex(store.lastIndex() + 1);
  return lo === hi ? [] : store.entries(lo, hi, Number.MAX_SAFE_INTEGER);
}

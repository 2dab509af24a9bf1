/**
 * Goal: the replica keeps every property over any store that honours the
 * RaftLogStore contract, not only over @fencer/wal's; and the model store
 * itself loses only what was not yet durable.
 * Method: five sweep seeds over the call-level model store, and a direct
 * crash check of the model.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, SeededRandom, Term } from '@fencer/base';
import { EntryType } from '@fencer/raft';
import type { RaftLogStore } from '@fencer/wal';
import { ModelDisk, sweepOptions } from '../src/index.js';
import { expectClean, seedRange } from './sweep.js';

describe('model store', () => {
  it.each(seedRange(1, 5))('sweep seed %i over the model store: no violation', (seed) => {
    expectClean(sweepOptions(seed, { seconds: 60, store: 'model' }));
  });

  it('a crash keeps what completed and at most a prefix of what was in flight', () => {
    const queue: (() => void)[] = [];
    const disk = new ModelDisk(
      (_ms, fn) => queue.push(fn),
      () => 1,
    );
    const open = (): RaftLogStore => {
      let store: RaftLogStore | undefined;
      disk.open((_e, s) => (store = s));
      queue.splice(0).forEach((fn) => fn());
      return store as RaftLogStore;
    };
    const e = (i: number) => ({ index: LogIndex(i), term: Term(1), type: EntryType.Normal, data: Uint8Array.of(i) });
    const store = open();
    let durable = 0;
    store.save({ term: Term(1), vote: null, commit: LogIndex(0) }, [e(1), e(2)], () => durable++);
    queue.shift()?.();
    expect(durable).toBe(1);
    store.save(undefined, [e(3)], () => durable++);
    store.save(undefined, [e(4)], () => durable++);
    expect(store.lastIndex()).toBe(4);
    disk.crash(new SeededRandom(7));
    const after = open();
    expect(after.lastIndex()).toBeGreaterThanOrEqual(2);
    expect(after.lastIndex()).toBeLessThanOrEqual(4);
    expect(after.initialState().hardState.term).toBe(1);
  });
});

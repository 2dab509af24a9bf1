/**
 * Goal: replicas stay identical. Snapshots are canonical (the same state
 * gives the same bytes), restore gives back exactly that state, replaying
 * one log on two instances gives equal state hashes and equal outcomes at
 * every index, and a corrupt snapshot stops the replica instead of loading.
 * Method: seeded realistic logs (test/random-log.ts, with namespace moves
 * and index gaps) replayed on fresh and restored instances; fast-check over
 * seeds and over byte corruptions.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AssertionError } from '@fencer/base';
import { fnv1a64, LockStateMachine, SNAPSHOT_FORMAT_VERSION, type FsmLimits } from './index.js';
import { randomLog } from '../test/random-log.js';

const LIMITS: Partial<FsmLimits> = { waitersPerLockMax: 3, holdersPerLockMax: 3, locksPerSessionMax: 3, dedupePerSessionMax: 5 };
const options = { autoClaim: true, limits: LIMITS };

describe('replay determinism', () => {
  it('two instances replaying one log have equal state hashes and equal results at every index; so does one restored midway', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const log = randomLog(seed, 600, LIMITS);
      const a = new LockStateMachine(options);
      const b = new LockStateMachine(options);
      let c: LockStateMachine | undefined;
      const restoreAt = 150 + seed * 50;
      let differentHashes = 0;
      let previousHash = '';
      for (let i = 0; i < log.length; i++) {
        const { index, data } = log[i]!;
        const ra = a.applyEntry(index, data);
        const rb = b.applyEntry(index, data);
        expect(rb).toEqual(ra);
        const hash = a.stateHash();
        expect(b.stateHash(), `seed ${seed} index ${index}`).toBe(hash);
        if (i === restoreAt) c = LockStateMachine.restore(a.snapshot(), options);
        else if (c !== undefined) {
          expect(c.applyEntry(index, data), `seed ${seed} index ${index}`).toEqual(ra);
          expect(c.stateHash(), `seed ${seed} index ${index}`).toBe(hash);
        }
        if (hash !== previousHash) differentHashes++;
        previousHash = hash;
      }
      // The hash follows the state (the applied index alone changes it every entry).
      expect(differentHashes).toBe(log.length);
      a.checkInvariants();
    }
  });

  it('the generated logs exercise moves: imports raise the revision base', () => {
    let raised = 0;
    for (const seed of [11, 12, 13, 14, 15, 16]) {
      const fsm = new LockStateMachine(options);
      for (const { index, data } of randomLog(seed, 800, LIMITS)) fsm.applyEntry(index, data);
      if (fsm.revisionBase > 0) raised++;
    }
    expect(raised).toBeGreaterThan(0);
  });
});

describe('canonical snapshots', () => {
  it('snapshot(restore(snapshot(s))) is byte-identical to snapshot(s) at every index of a log', () => {
    const log = randomLog(42, 500, LIMITS);
    const fsm = new LockStateMachine(options);
    for (const { index, data } of log) {
      fsm.applyEntry(index, data);
      const bytes = fsm.snapshot();
      const restored = LockStateMachine.restore(bytes, options);
      expect(restored.snapshot()).toEqual(bytes);
      expect(restored.revision).toBe(fsm.revision);
      restored.checkInvariants();
    }
  });

  it('holds for random seeds (fast-check)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 300 }), (seed, length) => {
        const fsm = new LockStateMachine(options);
        for (const { index, data } of randomLog(seed, length, LIMITS)) fsm.applyEntry(index, data);
        const bytes = fsm.snapshot();
        const restored = LockStateMachine.restore(bytes, options);
        expect(restored.snapshot()).toEqual(bytes);
        expect(restored.stateHash()).toBe(fsm.stateHash());
        expect([...restored.sessions()].sort((x, y) => (x.sessionId < y.sessionId ? -1 : 1))).toEqual(
          [...fsm.sessions()].sort((x, y) => (x.sessionId < y.sessionId ? -1 : 1)),
        );
      }),
      { numRuns: 60 },
    );
  });

  it('an empty state snapshots to a few bytes and restores', () => {
    const fsm = new LockStateMachine({ autoClaim: false, revisionBase: 7 });
    const bytes = fsm.snapshot();
    // version, applied index 0, revision base 7, no namespaces, no members, no staged imports, no move fences
    expect([...bytes]).toEqual([SNAPSHOT_FORMAT_VERSION, 0, 7, 0, 0, 0, 0]);
    expect(LockStateMachine.restore(bytes, { autoClaim: false }).revision).toBe(7);
  });
});

describe('corrupt snapshots', () => {
  const log = randomLog(7, 200, LIMITS);
  const fsm = new LockStateMachine(options);
  for (const { index, data } of log) fsm.applyEntry(index, data);
  const bytes = fsm.snapshot();

  it('every truncation is an AssertionError', () => {
    expect(bytes.length).toBeGreaterThan(100);
    for (let n = 0; n < bytes.length; n++) {
      expect(() => LockStateMachine.restore(bytes.subarray(0, n), options)).toThrow(AssertionError);
    }
  });

  it('trailing bytes or an unknown format version are an AssertionError', () => {
    expect(() => LockStateMachine.restore(new Uint8Array([...bytes, 0]), options)).toThrow(AssertionError);
    for (const version of [0, SNAPSHOT_FORMAT_VERSION + 1]) {
      const other = bytes.slice();
      other[0] = version;
      expect(() => LockStateMachine.restore(other, options)).toThrow(/unknown snapshot format version/);
    }
  });

  it('a corrupted byte either fails with an AssertionError or restores to a consistent state that snapshots back to itself', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: bytes.length - 1 }), fc.integer({ min: 0, max: 255 }), (at, value) => {
        const corrupt = bytes.slice();
        corrupt[at] = value;
        let restored: LockStateMachine;
        try {
          restored = LockStateMachine.restore(corrupt, options);
        } catch (e) {
          expect(e).toBeInstanceOf(AssertionError);
          return;
        }
        restored.checkInvariants();
        expect(restored.snapshot()).toEqual(corrupt);
      }),
      { numRuns: 500 },
    );
  });
});

describe('fnv1a64', () => {
  it('matches the published FNV-1a 64-bit test vectors', () => {
    const ascii = (s: string) => new Uint8Array([...s].map((c) => c.charCodeAt(0)));
    expect(fnv1a64(new Uint8Array(0))).toBe('cbf29ce484222325');
    expect(fnv1a64(ascii('a'))).toBe('af63dc4c8601ec8c');
    expect(fnv1a64(ascii('foobar'))).toBe('85944171f73967e8');
  });

  it('agrees with a BigInt reference on random bytes', () => {
    const reference = (bytes: Uint8Array) => {
      let h = 0xcbf29ce484222325n;
      for (const b of bytes) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
      return h.toString(16).padStart(16, '0');
    };
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => fnv1a64(bytes) === reference(bytes)));
  });
});

/**
 * Goal: the wire enum numbers that @fencer/contract generates for the pure
 * libs (libs/contract/src/gen/wire-enums.ts, by protobufjs) are exactly
 * ts-proto's numbers in this package: two generators read one proto, and
 * neither may drift from the other.
 * Method: find every enum ts-proto generated for the client contract (an
 * object with an UNRECOGNIZED member), and compare it value by value, both
 * ways, with the contract's object of the same name (whose keys drop the
 * proto's enum prefix).
 */
import { describe, expect, it } from 'vitest';
import * as contract from '@fencer/contract';
import { lockservice } from '../src/index.js';

/** LockMode -> LOCK_MODE_ */
const prefixOf = (name: string): string => `${name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()}_`;

/** name -> number of a ts-proto numeric enum, without the reverse mapping and without UNRECOGNIZED. */
function numbersOf(e: Record<string, unknown>): Record<string, number> {
  return Object.fromEntries(Object.entries(e).filter(([k, v]) => typeof v === 'number' && k !== 'UNRECOGNIZED')) as Record<string, number>;
}

const generated = Object.entries(lockservice as unknown as Record<string, unknown>).filter(
  (entry): entry is [string, Record<string, unknown>] => typeof entry[1] === 'object' && entry[1] !== null && 'UNRECOGNIZED' in entry[1],
);

describe('wire enums of the contract', () => {
  it('finds the enums of lockservice.proto', () => {
    expect(generated.map(([name]) => name).sort()).toEqual(['AcquireStatus', 'LockMode', 'WatchEventType']);
  });

  it.each(generated)('%s has the same names and numbers in @fencer/contract', (name, tsProto) => {
    const ours = (contract as unknown as Record<string, Record<string, number> | undefined>)[name];
    expect(ours, `@fencer/contract exports ${name}`).toBeDefined();
    const prefix = prefixOf(name);
    const expected = Object.fromEntries(Object.entries(numbersOf(tsProto)).map(([k, v]) => [k.slice(prefix.length), v]));
    expect({ ...ours }).toEqual(expected);
  });

  it('spot checks: the numbers the cell and the client put on the wire', () => {
    expect(contract.LockMode.EXCLUSIVE).toBe(lockservice.LockMode.LOCK_MODE_EXCLUSIVE);
    expect(contract.AcquireStatus.GRANTED).toBe(1);
    expect(contract.WatchEventType.PROGRESS).toBe(lockservice.WatchEventType.WATCH_EVENT_TYPE_PROGRESS);
  });
});

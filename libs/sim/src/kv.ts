/**
 * The simulator's state machine: a handful of registers. Each write puts a
 * unique write id into one register and records the log index that did it,
 * so a read can tell exactly which writes it reflects. Crashes on a command
 * kind it does not know (hashicorp/raft's rule for FSMs).
 */
import type { Entry } from '@fencer/raft';
import type { StateMachine } from '@fencer/replica';
import { assert } from '@fencer/base';
import { Hasher } from './hash.js';

export const KV_KEYS = 8;
const PUT = 1;

export interface PutResult {
  readonly key: number;
  /** The write id this one replaced (0 for none). */
  readonly previous: number;
}

export function encodePut(key: number, writeId: number): Uint8Array {
  assert(Number.isInteger(key) && key >= 0 && key < KV_KEYS, 'key in range');
  assert(Number.isInteger(writeId) && writeId > 0 && writeId <= 0xffff_ffff, 'write id is a positive u32');
  const b = new Uint8Array(6);
  b[0] = PUT;
  b[1] = key;
  new DataView(b.buffer).setUint32(2, writeId, true);
  return b;
}

export function decodePut(data: Uint8Array): { key: number; writeId: number } {
  assert(data.length === 6 && data[0] === PUT, `unknown command kind ${data[0]}`);
  const key = data[1] as number;
  assert(key < KV_KEYS, 'key in range');
  return { key, writeId: new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(2, true) };
}

export class KvStateMachine implements StateMachine {
  /** Per key: the write id last put, and the log index of that put. */
  readonly values = new Array<number>(KV_KEYS).fill(0);
  readonly versions = new Array<number>(KV_KEYS).fill(0);
  /** Index of the last command applied (blank and membership entries never reach us). */
  lastIndex = 0;
  applyCount = 0;

  apply(entry: Entry): PutResult {
    assert(entry.index > this.lastIndex, `commands apply in log order (${entry.index} after ${this.lastIndex})`);
    const { key, writeId } = decodePut(entry.data);
    const previous = this.values[key] as number;
    this.values[key] = writeId;
    this.versions[key] = entry.index;
    this.lastIndex = entry.index;
    this.applyCount++;
    return { key, previous };
  }

  snapshot(): Uint8Array {
    const b = new Uint8Array(8 + KV_KEYS * 16);
    const v = new DataView(b.buffer);
    v.setFloat64(0, this.lastIndex, true);
    for (let k = 0; k < KV_KEYS; k++) {
      v.setFloat64(8 + k * 16, this.values[k] as number, true);
      v.setFloat64(16 + k * 16, this.versions[k] as number, true);
    }
    return b;
  }

  restore(data: Uint8Array): void {
    assert(data.length === 8 + KV_KEYS * 16, `kv snapshot has ${data.length} bytes`);
    const v = new DataView(data.buffer, data.byteOffset, data.byteLength);
    this.lastIndex = v.getFloat64(0, true);
    for (let k = 0; k < KV_KEYS; k++) {
      this.values[k] = v.getFloat64(8 + k * 16, true);
      this.versions[k] = v.getFloat64(16 + k * 16, true);
    }
  }

  /** Digest of the whole state: equal on every replica that applied the same prefix. */
  stateHash(): string {
    const h = new Hasher().num(this.lastIndex);
    for (let k = 0; k < KV_KEYS; k++) h.num(this.values[k] as number).num(this.versions[k] as number);
    return h.hex();
  }
}

/**
 * Membership changes: their encoding in a ConfChange entry's data, and the
 * rule that applies one to a configuration.
 *
 * Each change sets one node's status absolutely (voter, learner or absent),
 * so applying a suffix of the changes again on top of a configuration that
 * already reflects some of them gives the same result. The core relies on
 * this when it rebuilds membership from the log at start (raft.ts).
 */
import { assert, AssertionError, NodeId } from '@fencer/base';
import { ConfChangeType } from './types.js';
import type { ConfChange, ConfState } from './types.js';

const FORMAT_VERSION = 1;

/** Layout: [version u8][type u8][node id, UTF-8]. */
export function encodeConfChange(change: ConfChange): Uint8Array {
  assertConfChange(change);
  const id = utf8Encode(change.node);
  const out = new Uint8Array(2 + id.length);
  out[0] = FORMAT_VERSION;
  out[1] = change.type;
  out.set(id, 2);
  return out;
}

export function decodeConfChange(data: Uint8Array): ConfChange {
  const parsed = parseConfChange(data);
  if (typeof parsed === 'string') throw new AssertionError(parsed);
  return parsed;
}

/** Whether `data` decodes to a ConfChange: the check for entries that arrive from the network. */
export function isConfChangeData(data: Uint8Array): boolean {
  return typeof parseConfChange(data) !== 'string';
}

/** The change, or what is wrong with the bytes. */
function parseConfChange(data: Uint8Array): ConfChange | string {
  if (data.length < 3) return `a ConfChange entry needs at least 3 bytes, got ${data.length}`;
  if (data[0] !== FORMAT_VERSION) return `unknown ConfChange format version ${data[0]}`;
  const type = data[1] as ConfChangeType;
  if (type !== ConfChangeType.AddVoter && type !== ConfChangeType.AddLearner && type !== ConfChangeType.RemoveNode) {
    return `unknown ConfChange type ${String(type)}`;
  }
  const node = utf8Decode(data.subarray(2));
  if (node === undefined) return 'ConfChange node id is not valid UTF-8';
  return { type, node: NodeId(node) };
}

function assertConfChange(change: ConfChange): void {
  assert(
    change.type === ConfChangeType.AddVoter || change.type === ConfChangeType.AddLearner || change.type === ConfChangeType.RemoveNode,
    `unknown ConfChange type ${String(change.type)}`,
  );
  assert(typeof change.node === 'string' && change.node.length > 0, 'a ConfChange names a node');
}

/** The configuration after `change`; the input is not modified. Voters and learners stay sorted. */
export function applyConfChange(conf: ConfState, change: ConfChange): ConfState {
  const voters = conf.voters.filter((v) => v !== change.node);
  const learners = conf.learners.filter((l) => l !== change.node);
  if (change.type === ConfChangeType.AddVoter) voters.push(change.node);
  else if (change.type === ConfChangeType.AddLearner) learners.push(change.node);
  voters.sort();
  learners.sort();
  return { voters, learners };
}

export function confStatesEqual(a: ConfState, b: ConfState): boolean {
  return (
    a.voters.length === b.voters.length &&
    a.learners.length === b.learners.length &&
    a.voters.every((v, i) => b.voters[i] === v) &&
    a.learners.every((l, i) => b.learners[i] === l)
  );
}

export const emptyConfState: ConfState = { voters: [], learners: [] };

// The core's type environment has no TextEncoder (no DOM or node types), and
// node ids are short: UTF-8 through the URI escapes of the language itself.
function utf8Encode(s: string): Uint8Array {
  const escaped = encodeURIComponent(s);
  const out: number[] = [];
  for (let i = 0; i < escaped.length; i++) {
    if (escaped[i] === '%') {
      out.push(parseInt(escaped.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      out.push(escaped.charCodeAt(i));
    }
  }
  return Uint8Array.from(out);
}

function utf8Decode(bytes: Uint8Array): string | undefined {
  let escaped = '';
  for (const b of bytes) escaped += '%' + b.toString(16).padStart(2, '0');
  try {
    return decodeURIComponent(escaped);
  } catch {
    return undefined;
  }
}

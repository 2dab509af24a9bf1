/**
 * Goal: the meta group's peer port takes Raft messages only from the group's
 * members and the leader it follows. Forged and malformed frames sent to the
 * peer port of every control-plane instance (seeded garbage, a batch for
 * another group, Heartbeat and AppendEntries from a non-member at the
 * group's term + 1 and at 2^53-1) make no instance exit, leave the leader
 * and every instance's term where they were, are counted by reason in
 * fencer_raft_messages_refused_total, and the HTTP API still answers.
 * Method: three control-plane processes (apps/control-plane/dist/main.js) on
 * 127.0.0.1, no cells. The leader comes from /v1/health, the term from
 * fencer_cp_raft_term; both are read once all three agree. Every payload
 * goes to every instance's peer port on its own connection, which the test
 * half-closes and waits to see closed: the server hands a frame's messages
 * on (or refuses them) before it closes, so a forgery it acted on has
 * moved the term by the time the connection is gone. Garbage comes from a
 * seeded generator (SEED below). Every forged message carries a term above
 * the group's, so one that an instance acted on would move its term at once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, ensureBuilt, planGroup, stopInstances } from './support/instances.js';
import { SeededRandom } from '@fencer/base';
import { raftpb } from '@fencer/protocol';
import { sendRaw } from '@fencer/protocol/testing';

/** The garbage's seed; FENCER_FORGED_SEED=<n> replays another. */
const SEED = Number(process.env['FENCER_FORGED_SEED'] ?? 0x5eed20);
/** The meta group's id on the peer transport (main.ts META_GROUP_ID). */
const META_GROUP_ID = 'fencer-meta';
/** A node id no configuration names. */
const INTRUDER = 'intruder-9';
const TERM_NEAR_2_53 = 2 ** 53 - 1;
const FRAME_BYTES_MAX = 64 * 1024 * 1024;
const { MessageType: T } = raftpb;

interface Instance {
  readonly id: string;
  readonly url: string;
  readonly peerPort: number;
  readonly metricsUrl: string;
  readonly argv: string[];
  child?: ChildProcess;
}

let dir = '';
const instances: Instance[] = [];

/** Polls `probe` until it returns a value, for at most `timeoutMs`. */
async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > until) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  } catch {
    return undefined;
  }
}

async function metricsOf(i: Instance): Promise<string> {
  return (await fetch(i.metricsUrl, { signal: AbortSignal.timeout(5_000) })).text();
}

function termIn(text: string): number {
  const m = /^fencer_cp_raft_term (\d+)$/m.exec(text);
  if (!m) throw new Error('no fencer_cp_raft_term in the metrics');
  return Number(m[1]);
}

function refusalsIn(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^fencer_raft_messages_refused_total\{reason="([^"]+)"\} (\d+)$/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

/** The leader each instance names (/v1/health) and its term, or undefined when an instance names none. */
async function viewOf(i: Instance): Promise<{ leader: string; term: number } | undefined> {
  const h = await getJson(`${i.url}/v1/health`);
  if (h?.status !== 200) return undefined;
  const leader = h.body['role'] === 'leader' ? i.id : (h.body['leader'] as string | undefined);
  if (leader === undefined) return undefined;
  return { leader, term: termIn(await metricsOf(i)) };
}

/** The leader and term once all three instances agree on both. */
async function agreedView(timeoutMs: number): Promise<{ leader: string; term: number }> {
  return eventually(
    async () => {
      const views = await Promise.all(instances.map(viewOf));
      const first = views[0];
      if (first === undefined) return undefined;
      return views.every((v) => v?.leader === first.leader && v.term === first.term) ? first : undefined;
    },
    timeoutMs,
    'all three instances naming one leader at one term',
  );
}

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-cp-forged-'));
  for (const p of await planGroup(dir)) {
    instances.push({
      id: p.id,
      url: p.url,
      peerPort: p.peerPort,
      metricsUrl: p.metricsUrl,
      // A 2 s election timeout: an instance starved of CPU on a shared machine must not start an election of its own,
      // which would move the term as a forgery would. A forgery an instance acted on moves its term at once.
      argv: [...p.argv, '--election-ticks', '20'],
    });
  }
  for (const i of instances) {
    const log = openSync(path.join(dir, `${i.id}.log`), 'a');
    i.child = spawn(process.execPath, i.argv, { stdio: ['ignore', log, log], env: { ...process.env, FENCER_LOG_LEVEL: 'warn' } });
  }
}, 120_000);

afterAll(async () => {
  await stopInstances(instances);
  if (dir && !process.env['FENCER_KEEP_TEST_DATA']) rmSync(dir, { recursive: true, force: true });
}, 30_000);

// ------------------------------------------------------------ payloads

function wire(m: Partial<raftpb.RaftMessage> & Pick<raftpb.RaftMessage, 'type' | 'from' | 'to' | 'term'>): raftpb.RaftMessage {
  return { entries: [], ...m };
}

/** A frame as the TCP peer transport sends it: a 4-byte big-endian length, then the RaftBatch. */
function frame(groupId: string, messages: raftpb.RaftMessage[]): Buffer {
  return prefixed(-1, raftpb.RaftBatch.encode({ senderAddress: '', cellId: groupId, messages }).finish());
}

/** A 4-byte big-endian length prefix (`length`, or the body's own length when negative) followed by `body`. */
function prefixed(length: number, body: Uint8Array): Buffer {
  const b = Buffer.alloc(4 + body.length);
  b.writeUInt32BE(length < 0 ? body.length : length, 0);
  b.set(body, 4);
  return b;
}

function randomBytes(random: SeededRandom, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = random.int(256);
  return b;
}

interface Forgery {
  readonly what: string;
  readonly bytes: Buffer;
  /** The refusal reason the receiving instance must count for it (once: the stream closes at the first refusal). */
  readonly reason: string;
}

/** Frames for instance `self` at the group's term `term` (`member` is another member): none may move the term. */
function forgedFrames(self: string, member: string, term: number, random: SeededRandom): Forgery[] {
  const higher = term + 1;
  const fromIntruder = (type: raftpb.MessageType, t: number): raftpb.RaftMessage =>
    wire({ type, from: INTRUDER, to: self, term: t, index: 0, logTerm: 0, commit: 0 });
  return [
    {
      what: 'a Heartbeat from a non-member, term + 1',
      bytes: frame(META_GROUP_ID, [fromIntruder(T.MESSAGE_TYPE_HEARTBEAT, higher)]),
      reason: 'not-member',
    },
    {
      what: 'an AppendEntries from a non-member, term + 1',
      bytes: frame(META_GROUP_ID, [fromIntruder(T.MESSAGE_TYPE_APPEND_ENTRIES, higher)]),
      reason: 'not-member',
    },
    {
      what: 'a RequestVote and a TimeoutNow from a non-member, term + 1',
      bytes: frame(META_GROUP_ID, [fromIntruder(T.MESSAGE_TYPE_REQUEST_VOTE, higher), fromIntruder(T.MESSAGE_TYPE_TIMEOUT_NOW, higher)]),
      reason: 'not-member',
    },
    {
      what: "a member's Heartbeat and a non-member's AppendEntries in one batch, term + 1",
      bytes: frame(META_GROUP_ID, [
        wire({ type: T.MESSAGE_TYPE_HEARTBEAT, from: member, to: self, term: higher, commit: 0 }),
        fromIntruder(T.MESSAGE_TYPE_APPEND_ENTRIES, higher),
      ]),
      reason: 'not-member',
    },
    {
      what: 'a Heartbeat from a non-member, term 2^53-1',
      bytes: frame(META_GROUP_ID, [fromIntruder(T.MESSAGE_TYPE_HEARTBEAT, TERM_NEAR_2_53)]),
      reason: 'not-member',
    },
    {
      what: 'an AppendEntries from a non-member, term 2^53-1',
      bytes: frame(META_GROUP_ID, [fromIntruder(T.MESSAGE_TYPE_APPEND_ENTRIES, TERM_NEAR_2_53)]),
      reason: 'not-member',
    },
    {
      what: "another group's batch from a member, term + 1",
      bytes: frame('cell-1', [wire({ type: T.MESSAGE_TYPE_HEARTBEAT, from: member, to: self, term: higher, commit: 0 })]),
      reason: 'other-cell',
    },
    { what: 'a huge length prefix (2^32-1)', bytes: prefixed(0xffff_ffff, randomBytes(random, 64)), reason: 'frame-too-large' },
    {
      what: 'a length prefix one above the frame limit',
      bytes: prefixed(FRAME_BYTES_MAX + 1, randomBytes(random, 16)),
      reason: 'frame-too-large',
    },
    // A field with wire type 7 (invalid) right away: no decoder takes it.
    {
      what: 'a frame whose payload is not a RaftBatch',
      bytes: prefixed(8, Buffer.from([0x0f, 1, 2, 3, 4, 5, 6, 7])),
      reason: 'undecodable',
    },
  ];
}

/** Seeded random bytes of several sizes, and a frame cut short: whatever the server makes of them, nothing may move. */
function garbage(random: SeededRandom): { what: string; bytes: Buffer }[] {
  return [
    ...[1, 3, 4, 5, 64, 4096, 256 * 1024].map((n) => ({ what: `${n} random bytes`, bytes: randomBytes(random, n) })),
    { what: 'a frame cut short', bytes: prefixed(1_000, randomBytes(random, 100)) },
  ];
}

// ------------------------------------------------------------ the test

describe("forged and malformed Raft messages to every control-plane instance's peer port", () => {
  it(
    'no instance exits, the leader and term stay, each refusal is counted by reason, and the HTTP API answers',
    { timeout: 90_000 },
    async () => {
      const before = await agreedView(30_000);
      const refusedBefore = new Map<string, Map<string, number>>();
      for (const i of instances) refusedBefore.set(i.id, refusalsIn(await metricsOf(i)));

      console.log(`forged-peer: seed ${SEED} (replay with FENCER_FORGED_SEED=${SEED})`);
      const random = new SeededRandom(SEED);
      const expected = new Map<string, Map<string, number>>();
      let sent = 0;
      for (const i of instances) {
        const member = instances.find((o) => o !== i)!.id;
        const frames = forgedFrames(i.id, member, before.term, random);
        const want = new Map<string, number>();
        for (const f of frames) want.set(f.reason, (want.get(f.reason) ?? 0) + 1);
        expected.set(i.id, want);
        for (const p of [...frames, ...garbage(random)]) {
          await sendRaw(i.peerPort, p.bytes);
          sent++;
        }
      }

      // The connections are closed, so every forged message has been refused or acted on.
      for (const i of instances) {
        expect(alive(i), `${i.id} (pid ${i.child?.pid}) still running`).toBe(true);
        expect(await viewOf(i), `${i.id}'s leader and term`).toEqual(before);
      }
      const counts: string[] = [];
      for (const i of instances) {
        const base = refusedBefore.get(i.id)!;
        const now = refusalsIn(await metricsOf(i));
        counts.push(`${i.id} ${JSON.stringify(Object.fromEntries([...now].map(([r, n]) => [r, n - (base.get(r) ?? 0)])))}`);
        for (const [reason, n] of expected.get(i.id)!) {
          const counted = (now.get(reason) ?? 0) - (base.get(reason) ?? 0);
          // Garbage may add frame-level refusals of its own; nothing but the forgeries names a sender or a group.
          if (reason === 'not-member' || reason === 'other-cell') expect(counted, `${i.id}: refusals counted as ${reason}`).toBe(n);
          else expect(counted, `${i.id}: refusals counted as ${reason}`).toBeGreaterThanOrEqual(n);
        }
      }
      // The API answers on every instance; /v1/routing passes a read barrier, so the group still has a working quorum.
      for (const i of instances) {
        const routing = await getJson(`${i.url}/v1/routing`);
        expect(routing?.status, `${i.id} GET /v1/routing`).toBe(200);
        expect(typeof routing?.body['version']).toBe('number');
      }
      expect(await agreedView(5_000)).toEqual(before);
      console.log(
        `forged-peer: ${sent} connections to ${instances.length} peer ports; leader ${before.leader} at term ${before.term} throughout; refused: ${counts.join(', ')}`,
      );
    },
  );
});

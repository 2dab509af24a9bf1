/**
 * Goal (docs/decisions/0013-peer-listener-and-hostile-input.md): forged and malformed Raft messages sent to
 * every port of a running cell (wrong `to`, `from` the receiver, a
 * non-member `from`, another cell, a term near 2^53, a term one above the
 * cell's, malformed entries, garbage bytes, HTTP/2 garbage, the Raft gRPC
 * service on the gRPC ports) make no replica exit, leave every replica's
 * term where it was, are counted by reason in
 * fencer_raft_messages_refused_total, and a client working through it all
 * sees no error; on either peer transport (--peer-transport tcp, the
 * default, and grpc).
 * Method: for each transport, three cell-node processes on 127.0.0.1
 * (tools/fleet/test-cell), one cell after the other; the port discovery,
 * senders and forgeries are in support/forgeries.ts.
 * Each process's listening ports are read from the kernel (/proc/<pid>/fd
 * and /proc/net/tcp) and must be exactly the four its command line names
 * (--listen, --admin-listen, --metrics-listen, --peer-listen), so a socket
 * added later cannot escape the barrage. Every payload goes to every port
 * of every replica on its own connection, which the test half-closes and
 * waits to see closed. On a gRPC peer port the forged batches travel
 * instead as messages of RaftTransport.Send, one call each, through a
 * grpc-js client built from the generated definitions, and each call must
 * end with the status the refusal calls for (never INTERNAL or UNKNOWN, and
 * never left open); the same batches also arrive there as raw TCP frames,
 * which are garbage to HTTP/2. Garbage comes from a seeded generator (SEED
 * below).
 * A client loop (acquire and release through every replica, no retries)
 * and a KeepAlive stream run from before the barrage until after it. The
 * refusals are awaited in each replica's metrics before the terms are read.
 * Every forged message carries a term above the cell's, so one that a
 * replica acted on would have moved its term at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServiceError, status } from '@grpc/grpc-js';
import { FencerError, SeededRandom } from '@fencer/base';
import { fromServiceError, lockservice } from '@fencer/protocol';
import { sendRaw } from '@fencer/protocol/testing';
import { type Cell, eventually, startCell } from './support/cell.js';
import {
  type Forgery,
  NOT_A_BATCH,
  type PortKind,
  SEND_PATH,
  type Target,
  forgedFrames,
  garbage,
  http2Call,
  listeningPorts,
  peerStreamCall,
  raftServiceCall,
  randomBytes,
  targets,
} from './support/forgeries.js';

/** The garbage's seed; FENCER_FORGED_SEED=<n> replays another. */
const SEED = Number(process.env.FENCER_FORGED_SEED ?? 0x5eed18);
/** The largest request a cell node takes over gRPC (its --grpc-message-bytes-max default). */
const GRPC_MESSAGE_BYTES_MAX = 4 * 1024 * 1024;

// ------------------------------------------------------------ observing

async function refusals(metricsUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^fencer_raft_messages_refused_total\{reason="([^"]+)"\} (\d+)$/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Acquire and release through every replica in turn, no retries: every error is recorded. */
function clientLoop(cell: Cell, ns: string, sessionId: string, stop: () => boolean) {
  const errors: string[] = [];
  let rounds = 0;
  const roundsMax = 5_000;
  const done = (async () => {
    const until = Date.now() + 120_000;
    while (!stop() && rounds < roundsMax && Date.now() < until) {
      const via = cell.endpoints[rounds % cell.endpoints.length]!;
      const name = `/ls/${ns}/l${rounds % 4}`;
      try {
        const got = await cell.client.once<lockservice.AcquireRequest, lockservice.AcquireResponse>(via, 'acquire', {
          sessionId,
          name,
          mode: lockservice.LockMode.LOCK_MODE_EXCLUSIVE,
          waitMs: 0,
          requestId: `forged-${rounds}`,
          lockDelayMs: 0,
        });
        if (got.status !== lockservice.AcquireStatus.ACQUIRE_STATUS_GRANTED) errors.push(`round ${rounds}: Acquire answered ${got.status}`);
        else await cell.client.once(via, 'release', { sessionId, name, token: got.token });
      } catch (e) {
        errors.push(`round ${rounds} via ${via}: ${e instanceof FencerError ? `${e.code} ${e.message}` : String(e)}`);
      }
      rounds++;
    }
  })();
  return { errors, rounds: () => rounds, done };
}

/** One KeepAlive stream to `address`, heartbeating every intervalMs; errors and expiries are recorded. */
function keepAliveStream(cell: Cell, address: string, sessionId: string, intervalMs: number) {
  const errors: string[] = [];
  const expired: string[] = [];
  let acks = 0;
  const stream = cell.client.raw(address).keepAlive();
  stream.on('data', (r: lockservice.KeepAliveResponse) => {
    acks++;
    if (r.expired) expired.push(r.sessionId);
  });
  stream.on('error', (e: ServiceError) => {
    if (e.code !== status.CANCELLED) errors.push(`KeepAlive: ${fromServiceError(e).code} ${e.details}`);
  });
  const beat = (): void => void stream.write({ sessionId });
  beat();
  const timer = setInterval(beat, intervalMs);
  return {
    errors,
    expired,
    acks: () => acks,
    stop: () => {
      clearInterval(timer);
      stream.cancel();
    },
  };
}

// ------------------------------------------------------------ the gRPC peer port

/**
 * How a Send call carrying a forged batch must end, by the refusal it is counted under: a batch refused whole ends the
 * call with a status saying why; one whose messages reach the core (which drops them) leaves the call to end OK.
 */
const STREAM_REFUSED: Readonly<Record<string, status>> = {
  'other-cell': status.FAILED_PRECONDITION,
  'not-member': status.PERMISSION_DENIED,
};

/**
 * The forgeries on a gRPC peer port of replica `t`: each forged batch on its own RaftTransport.Send call, then gRPC's
 * own framing forged (a message that is not a RaftBatch, one flagged gzip that does not decompress, length prefixes
 * over the message limit). Returns the refusal reasons the replica must count for them; fails at the first call that
 * ends otherwise than it must.
 */
async function barrageGrpcPeer(t: Target, frames: readonly Forgery[], random: SeededRandom): Promise<Map<string, number>> {
  const want = new Map<string, number>();
  const count = (reason: string, n: number): void => void want.set(reason, (want.get(reason) ?? 0) + n);
  for (const f of frames) {
    if (f.batch === undefined) continue; // a forgery of the TCP framing: its gRPC counterparts follow
    const end = await peerStreamCall(t.ports.peer, f.batch);
    const code = STREAM_REFUSED[f.reason] ?? status.OK;
    expect(end.code === undefined ? end.details : status[end.code], `${t.id} gRPC peer port, ${f.what}: ${end.details}`).toBe(status[code]);
    count(f.reason, f.count);
  }
  const undecodable = await http2Call(t.ports.peer, SEND_PATH, NOT_A_BATCH);
  expect(undecodable, `${t.id} gRPC peer port, a message that is not a RaftBatch`).toBe(String(status.INVALID_ARGUMENT));
  count('undecodable', 1);
  // Flagged gzip but not gzip: grpc-js refuses it before the service sees it (so it is not counted), never INTERNAL.
  const compressed = await http2Call(t.ports.peer, SEND_PATH, randomBytes(random, 16), 16, true);
  expect(compressed, `${t.id} gRPC peer port, a message flagged gzip that does not decompress`).toBe(String(status.INVALID_ARGUMENT));
  for (const declared of [0xffff_ffff, GRPC_MESSAGE_BYTES_MAX + 1]) {
    const h2 = await http2Call(t.ports.peer, SEND_PATH, randomBytes(random, 16), declared);
    expect(h2, `${t.id} gRPC peer port, a length prefix of ${declared}`).toBe(String(status.RESOURCE_EXHAUSTED));
  }
  return want;
}

// ------------------------------------------------------------ the test

describe.each(['tcp', 'grpc'] as const)(
  'forged and malformed Raft messages to every port of a cell on --peer-transport %s',
  (transport) => {
    let cell: Cell;
    beforeAll(async () => {
      // A 2 s election timeout (sessions must then live at least twice its 4 s upper bound): a replica starved of CPU on
      // a shared machine must not start an election of its own, which would move the term as a forgery would. A forged
      // message that a replica acted on moves its term at once, whatever the timeout.
      cell = await startCell({
        replicas: 3,
        extraArgs: ['--election-ticks', '20', '--ttl-min-ms', '8000', '--peer-transport', transport],
      });
    });
    afterAll(async () => {
      await cell?.stop();
    });

    it('no replica exits, no term moves, each refusal is counted, and the client sees no error', { timeout: 240_000 }, async () => {
      const all = targets(cell);
      // Every port each process listens on is one its command line names, and each of those is listened on.
      for (const t of all) expect(listeningPorts(t.pid), t.id).toEqual(Object.values(t.ports).sort((x, y) => x - y));

      const leader = await cell.leader();
      const before = new Map<string, number>();
      for (const t of all) before.set(t.id, (await cell.statusOf(t.id))!.term);
      expect(new Set(before.values())).toEqual(new Set([leader.term]));
      const refusedBefore = new Map<string, Map<string, number>>();
      for (const r of cell.replicas) refusedBefore.set(r.id, await refusals(r.metrics));

      // The client: one session, KeepAlive to the leader, acquire/release through every replica.
      const ns = `forged-${process.pid}`;
      const session = await cell.client.openSession(ns, 10_000);
      const leaderAddress = cell.replicas.find((r) => r.id === leader.nodeId)!.grpc;
      const keepAlive = keepAliveStream(cell, leaderAddress, session.sessionId, 200);
      let barrageDone = false;
      const loop = clientLoop(cell, ns, session.sessionId, () => barrageDone);
      await eventually(() => (loop.rounds() >= 3 && keepAlive.acks() >= 1 ? true : undefined), 20_000, 'the client working');

      console.log(`forged-peer: seed ${SEED} (replay with FENCER_FORGED_SEED=${SEED})`);
      const random = new SeededRandom(SEED);
      const junk = garbage(random);
      const expected = new Map<string, Map<string, number>>();
      const raftCalls: string[] = [];
      let sent = 0;
      let grpcPeerCalls = 0;
      try {
        for (const t of all) {
          const [member, third] = all.filter((o) => o.id !== t.id).map((o) => o.id);
          const frames = forgedFrames(t.id, member!, third!, t.cellId, leader.term, random);
          if (transport === 'tcp') {
            const want = new Map<string, number>();
            for (const f of frames) want.set(f.reason, (want.get(f.reason) ?? 0) + f.count);
            expected.set(t.id, want);
          } else {
            expected.set(t.id, await barrageGrpcPeer(t, frames, random));
            grpcPeerCalls += frames.filter((f) => f.batch !== undefined).length + 3;
          }
          // Every port also gets the TCP frames and the garbage as raw bytes: on any port but a TCP peer port, frames
          // are garbage too.
          for (const kind of Object.keys(t.ports) as PortKind[]) {
            const port = t.ports[kind];
            for (const p of [...frames, ...junk]) {
              await sendRaw(port, p.bytes, 15_000);
              sent++;
            }
            if (kind === 'lock' || kind === 'admin') {
              const code = await raftServiceCall(port, t.cellId, t.id);
              raftCalls.push(`${t.id} ${kind}: ${status[code]}`);
              expect(code, `${t.id} ${kind} port, Raft service`).toBe(status.UNIMPLEMENTED);
              const h2 = await http2Call(port, SEND_PATH, frames[3]!.bytes);
              expect(h2, `${t.id} ${kind} port, Raft path over HTTP/2`).toBe(String(status.UNIMPLEMENTED));
            }
          }
        }

        // Wait for every refusal to be counted before reading the terms.
        for (const r of cell.replicas) {
          const want = expected.get(r.id)!;
          const base = refusedBefore.get(r.id)!;
          await eventually(
            async () => {
              const now = await refusals(r.metrics);
              return [...want].every(([reason, n]) => (now.get(reason) ?? 0) - (base.get(reason) ?? 0) >= n) ? true : undefined;
            },
            20_000,
            `${r.id} counting ${JSON.stringify([...want])}`,
          );
        }
        // One more acquire/release round after the last refusal, then the client stops.
        const roundsAtEnd = loop.rounds();
        await eventually(() => (loop.rounds() > roundsAtEnd + 1 ? true : undefined), 20_000, 'a client round after the barrage');
      } finally {
        barrageDone = true;
        await loop.done;
        keepAlive.stop();
      }

      for (const t of all) {
        expect(alive(t.pid) && cell.children.get(t.id)!.exitCode === null, `${t.id} (pid ${t.pid}) still running`).toBe(true);
        const st = await cell.statusOf(t.id, 5_000);
        expect(st, `${t.id} answers admin Status`).toBeDefined();
        expect(st!.term, `${t.id}'s term`).toBe(before.get(t.id));
        expect(st!.leaderId, `${t.id}'s leader`).toBe(leader.nodeId);
      }
      expect(loop.errors).toEqual([]);
      expect(keepAlive.errors).toEqual([]);
      expect(keepAlive.expired).toEqual([]);
      expect(loop.rounds()).toBeGreaterThan(0);
      expect(keepAlive.acks()).toBeGreaterThan(1);
      console.log(
        `forged-peer (${transport}): ${sent} connections to ${all.length * 4} ports, ${raftCalls.length} Raft service calls ` +
          `on client and admin ports, ${grpcPeerCalls} calls on gRPC peer ports, ` +
          `${loop.rounds()} client rounds, ${keepAlive.acks()} KeepAlive acks`,
      );
    });
  },
);

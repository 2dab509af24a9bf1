/**
 * Goal: a learner that was away while the cell changed leader to a member it
 * has never heard of takes that leader once it is back, without a restart.
 * A cell node refuses Raft messages from strangers while it follows a leader
 * (peer-codec.ts admitsSender), and a learner never campaigns, so only the
 * core forgetting a leader it no longer hears from lets the new one in.
 * Method: a real three-replica cell plus a learner process started with
 * --join. The cell reaches the learner's peer port through a TCP relay owned
 * by the test: a stopped process still has its kernel take and buffer what
 * peers send, and it would read D's addition from the buffer once continued,
 * so the relay is cut (every connection closed, new ones refused) and the
 * learner SIGSTOPped, a partition with no clock running. Meanwhile a fourth
 * process D joins, is promoted, takes the leadership, the old leader is
 * removed and locks are written. Then the relay is restored and the learner
 * SIGCONTed: within a bounded wait the same process must name D as its
 * leader at D's term (admin Status), which it can only learn from D's
 * messages, and apply D's log up to D's commit index. The learner has no
 * peer address for D (the member directory's entry for D is among what it
 * missed): it answers D at the peer address D's batches carry
 * (RaftBatch.sender_address), or D would never learn where its log ends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { adminpb } from '@fencer/protocol';
import { type Cell, TestClient, admin, eventually, planJoiner, startCell } from './support/cell.js';
import { spawnReplica, stopAll, type ReplicaPlan } from '@fencer/fleet';

type Status = adminpb.StatusResponse;

let cell: Cell;
const joiners: ChildProcess[] = [];
let relay: Relay | undefined;

/** A TCP relay on 127.0.0.1 to `target` that can be cut (connections closed, new ones refused) and restored. */
interface Relay {
  readonly address: string;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

async function startRelay(target: string): Promise<Relay> {
  const [host, port] = [target.split(':')[0]!, Number(target.split(':')[1])];
  const open = new Set<net.Socket>();
  let isCut = false;
  const server = net.createServer((inbound) => {
    if (isCut) {
      inbound.destroy();
      return;
    }
    const outbound = net.connect(port, host);
    for (const [a, b] of [
      [inbound, outbound],
      [outbound, inbound],
    ] as const) {
      open.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        open.delete(a);
        b.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut() {
      isCut = true;
      for (const s of open) s.destroy();
    },
    restore() {
      isCut = false;
    },
    close() {
      for (const s of open) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const status = (p: { admin: string }): Promise<Status | undefined> =>
  admin<adminpb.StatusRequest, Status>(p.admin, 'status', {}).catch(() => undefined);

function spawnJoiner(plan: ReplicaPlan): ChildProcess {
  const child = spawnReplica(plan, { logDir: path.join(cell.dataDir, 'logs') });
  joiners.push(child);
  return child;
}

/**
 * Adds `plan` as a learner through the leader, the cell reaching it at
 * `peerAddress`, and waits until it has applied the leader's commit index.
 */
async function addLearner(leaderAdmin: string, plan: ReplicaPlan, peerAddress = plan.peer): Promise<Status> {
  await admin(leaderAdmin, 'addMember', { id: plan.id, address: plan.grpc, learner: true, peerAddress });
  const target = (await status({ admin: leaderAdmin }))!.commitIndex;
  return eventually(
    async () => {
      const s = await status(plan);
      return s && s.appliedIndex >= target ? s : undefined;
    },
    15_000,
    `${plan.id} to catch up as a learner`,
  );
}

beforeAll(async () => {
  cell = await startCell({ replicas: 3 });
});

afterAll(async () => {
  // A stopped process handles SIGTERM only once continued.
  for (const c of joiners) if (c.exitCode === null && c.signalCode === null) c.kill('SIGCONT');
  await stopAll(joiners);
  await relay?.close();
  await cell?.stop();
});

describe('a learner away during a change of leader', () => {
  it('follows the new leader, a member it never knew, and catches up on its log, once it is back, without a restart', async () => {
    const { sessionId } = await cell.client.openSession('learner', 60_000);
    for (let i = 0; i < 5; i++) await cell.client.acquire({ sessionId, name: `/ls/learner/before-${i}` });
    const old = await cell.leader();
    const oldLeader = cell.replicas.find((r) => r.id === old.nodeId)!;

    const learnerPlan = planJoiner(cell, 'cell-1-r8', 5);
    relay = await startRelay(learnerPlan.peer);
    const learner = spawnJoiner(learnerPlan);
    const joined = await addLearner(oldLeader.admin, learnerPlan, relay.address);
    expect(joined).toMatchObject({ role: 'follower', leaderId: oldLeader.id });

    // Away: it hears nothing of what follows, and its clock stands still.
    relay.cut();
    learner.kill('SIGSTOP');

    const dPlan = planJoiner(cell, 'cell-1-r9', 6);
    spawnJoiner(dPlan);
    await addLearner(oldLeader.admin, dPlan);
    await admin(oldLeader.admin, 'promoteLearner', { id: dPlan.id });
    await eventually(
      async () => ((await status(oldLeader))?.members.find((m) => m.id === dPlan.id)?.voter ? true : undefined),
      10_000,
      `${dPlan.id} to be a voter`,
    );
    const moved = await admin<adminpb.TransferLeadershipRequest, adminpb.TransferLeadershipResponse>(
      oldLeader.admin,
      'transferLeadership',
      {
        to: dPlan.id,
      },
    );
    expect(moved.leaderId).toBe(dPlan.id);
    await admin(dPlan.admin, 'removeMember', { id: oldLeader.id });
    await eventually(
      async () => {
        const s = await status(dPlan);
        return s && !s.members.some((m) => m.id === oldLeader.id) ? s : undefined;
      },
      10_000,
      `the removal of ${oldLeader.id}`,
    );

    const rest = cell.replicas.filter((r) => r.id !== oldLeader.id);
    const client = new TestClient([dPlan.grpc, ...rest.map((r) => r.grpc)]);
    try {
      const { sessionId: after } = await client.openSession('learner', 60_000);
      for (let i = 0; i < 5; i++) await client.acquire({ sessionId: after, name: `/ls/learner/after-${i}` });
    } finally {
      client.close();
    }
    const leaderNow = (await status(dPlan))!;
    expect(leaderNow).toMatchObject({ role: 'leader', nodeId: dPlan.id });

    relay.restore();
    learner.kill('SIGCONT');
    // It follows D once D's messages pass its peer port: only they carry D's term.
    const back = await eventually(
      async () => {
        const s = await status(learnerPlan);
        return s?.leaderId === dPlan.id ? s : undefined;
      },
      15_000,
      `${learnerPlan.id} to follow the new leader ${dPlan.id}`,
    );
    expect(back).toMatchObject({ role: 'follower', term: leaderNow.term });
    expect(back.term).toBeGreaterThan(joined.term);
    // And it catches up on D's log: its answers reach D at the peer address D's batches carry (it had none for D).
    const target = (await status(dPlan))!.commitIndex;
    await eventually(
      async () => {
        const s = await status(learnerPlan);
        return s && s.appliedIndex >= target ? s : undefined;
      },
      15_000,
      `${learnerPlan.id} to apply ${dPlan.id}'s log up to ${target}`,
    );
    // The same process, never restarted.
    expect([learner.exitCode, learner.signalCode]).toEqual([null, null]);
  }, 60_000);
});

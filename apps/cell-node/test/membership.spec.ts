/**
 * Goal: the admin API changes membership one server at a time: a new node
 * joins as a learner and catches up, is promoted to voter, and is removed;
 * its addresses are replicated, so every replica knows them and a later
 * leader still replicates to it; leadership moves on request; a snapshot can
 * be taken on demand.
 * Method: a real three-replica cell plus a fourth process started with --join,
 * listening for peers on a port no one could derive from its gRPC port.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { adminpb } from '@fencer/protocol';
import { type Cell, admin, eventually, planJoiner, startCell } from './support/cell.js';
import { spawnReplica, stopAll, type ReplicaPlan } from '@fencer/fleet';

let cell: Cell;
let joiner: ChildProcess | undefined;
let plan: ReplicaPlan;

beforeAll(async () => {
  cell = await startCell({ replicas: 3 });
  // Its peer port is not the default (gRPC port + 300): only the replicated member directory can tell the others.
  plan = planJoiner(cell, 'cell-1-r9', 5, 350);
  joiner = spawnReplica(plan, { logDir: path.join(cell.dataDir, 'logs') });
});

afterAll(async () => {
  if (joiner) await stopAll([joiner]);
  await cell?.stop();
});

describe('membership through the admin API', () => {
  it('adds a learner that catches up without voting, promotes it, then removes it', async () => {
    const { sessionId } = await cell.client.openSession('members', 60_000);
    for (let i = 0; i < 20; i++) await cell.client.acquire({ sessionId, name: `/ls/members/${i}` });
    const leader = await cell.leader();
    const leaderAdmin = cell.replicas.find((r) => r.id === leader.nodeId)!.admin;

    const follower = cell.replicas.find((r) => r.id !== leader.nodeId)!;
    const request: adminpb.AddMemberRequest = { id: plan.id, address: plan.grpc, learner: true, peerAddress: plan.peer };
    await expect(admin(follower.admin, 'addMember', request)).rejects.toMatchObject({ code: 'NOT_LEADER' });
    await expect(admin(leaderAdmin, 'addMember', { ...request, peerAddress: 'no port' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });

    await admin<adminpb.AddMemberRequest, adminpb.AddMemberResponse>(leaderAdmin, 'addMember', request);
    const caught = await eventually(
      async () => {
        const s = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(plan.admin, 'status', {}).catch(() => undefined);
        return s && s.appliedIndex >= leader.commitIndex && s.locks === 20 ? s : undefined;
      },
      15_000,
      'the learner to catch up',
    );
    expect(caught.role).toBe('follower');
    let st = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(leaderAdmin, 'status', {});
    expect(st.members.find((m) => m.id === plan.id)).toMatchObject({ voter: false });

    await admin(leaderAdmin, 'promoteLearner', { id: plan.id });
    st = await eventually(
      async () => {
        const s = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(leaderAdmin, 'status', {});
        return s.members.find((m) => m.id === plan.id)?.voter ? s : undefined;
      },
      10_000,
      'promotion',
    );
    expect(st.members.filter((m) => m.voter)).toHaveLength(4);

    // Still serving with four voters.
    await cell.client.acquire({ sessionId, name: '/ls/members/after-promotion' });

    // Every original replica learned the new member's addresses from the log.
    for (const r of cell.replicas) {
      const seen = await eventually(
        async () => {
          const s = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(r.admin, 'status', {});
          return s.members.find((m) => m.id === plan.id && m.peerAddress === plan.peer) ? s : undefined;
        },
        10_000,
        `${r.id} to know ${plan.id}'s addresses`,
      );
      expect(seen.members.find((m) => m.id === plan.id)).toMatchObject({ address: plan.grpc, peerAddress: plan.peer });
    }

    // A new leader, which was never told about the member by AddMember, still replicates to it.
    const next = cell.replicas.find((r) => r.id !== leader.nodeId)!;
    const moved = await admin<adminpb.TransferLeadershipRequest, adminpb.TransferLeadershipResponse>(leaderAdmin, 'transferLeadership', {
      to: next.id,
    });
    expect(moved.leaderId).toBe(next.id);
    for (let i = 0; i < 5; i++) await cell.client.acquire({ sessionId, name: `/ls/members/under-${next.id}-${i}` });
    const nextStatus = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(next.admin, 'status', {});
    await eventually(
      async () => {
        const s = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(plan.admin, 'status', {}).catch(() => undefined);
        return s && s.appliedIndex >= nextStatus.commitIndex && s.locks === 26 ? s : undefined;
      },
      15_000,
      `${plan.id} to catch up from the new leader ${next.id}`,
    );

    const nextAdmin = next.admin;
    await admin(nextAdmin, 'removeMember', { id: plan.id });
    st = await eventually(
      async () => {
        const s = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(nextAdmin, 'status', {});
        return s.members.some((m) => m.id === plan.id) ? undefined : s;
      },
      10_000,
      'removal',
    );
    expect(st.members.map((m) => m.id).sort()).toEqual(cell.replicas.map((r) => r.id).sort());
    await cell.client.acquire({ sessionId, name: '/ls/members/after-removal' });
  }, 90_000);

  it('transfers leadership on request and takes a snapshot on demand', async () => {
    const leader = await cell.leader();
    const leaderAdmin = cell.replicas.find((r) => r.id === leader.nodeId)!.admin;
    const target = cell.replicas.find((r) => r.id !== leader.nodeId)!;
    const moved = await admin<adminpb.TransferLeadershipRequest, adminpb.TransferLeadershipResponse>(leaderAdmin, 'transferLeadership', {
      to: target.id,
    });
    expect(moved.leaderId).toBe(target.id);
    const snap = await admin<adminpb.TakeSnapshotRequest, adminpb.TakeSnapshotResponse>(target.admin, 'takeSnapshot', {});
    expect(snap.index).toBeGreaterThan(0);
    expect(snap.bytes).toBeGreaterThan(0);
    const st = await admin<adminpb.StatusRequest, adminpb.StatusResponse>(target.admin, 'status', {});
    expect(st.snapshotIndex).toBe(snap.index);
  });
});

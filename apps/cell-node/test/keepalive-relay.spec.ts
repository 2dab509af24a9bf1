/**
 * Goal: a follower relays its KeepAlive streams' heartbeats to the leader in
 * batches, not one HeartbeatBatch call per heartbeat, and every heartbeat is
 * still answered with its own session's TTL.
 * Method: a real three-replica cell on 127.0.0.1; one KeepAlive stream to a
 * follower writes a burst of heartbeats for many sessions at once and waits
 * for every answer; the leader's fencer_rpcs_total{method="heartbeatBatch"}
 * counts the relayed batches (nothing else sends HeartbeatBatch here).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { lockservice } from '@fencer/protocol';
import { type Cell, startCell } from './support/cell.js';

let cell: Cell;
beforeAll(async () => {
  cell = await startCell({ replicas: 3 });
});
afterAll(async () => {
  await cell?.stop();
});

async function heartbeatBatches(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const m = /^fencer_rpcs_total\{method="heartbeatBatch",code="OK"\} (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

describe('KeepAlive on a follower', () => {
  it('relays a burst of heartbeats in far fewer HeartbeatBatch calls than heartbeats, answering each with its TTL', async () => {
    const sessionsN = 50;
    const burst = 400;
    const ttlMs = 30_000;
    const sessions: string[] = [];
    for (let i = 0; i < sessionsN; i++) sessions.push((await cell.client.openSession('relay', ttlMs)).sessionId);
    const leader = await cell.leader();
    const leaderPlan = cell.replicas.find((r) => r.id === leader.nodeId)!;
    const follower = cell.replicas.find((r) => r.id !== leader.nodeId)!;
    const before = await heartbeatBatches(leaderPlan.metrics);

    const stream = cell.client.raw(follower.grpc).keepAlive();
    const answers: lockservice.KeepAliveResponse[] = [];
    const all = new Promise<void>((resolve, reject) => {
      stream.on('data', (a: lockservice.KeepAliveResponse) => {
        answers.push(a);
        if (answers.length === burst) resolve();
      });
      stream.on('error', reject);
    });
    const sent: string[] = [];
    for (let i = 0; i < burst; i++) {
      const id = sessions[i % sessionsN]!;
      sent.push(id);
      stream.write({ sessionId: id });
    }
    await all;
    stream.end();

    expect(answers.map((a) => a.sessionId).sort()).toEqual([...sent].sort());
    for (const a of answers) {
      expect(a.expired).toBe(false);
      expect(a.ttlMsRemaining).toBeGreaterThan(0);
      expect(a.ttlMsRemaining).toBeLessThanOrEqual(ttlMs);
    }
    const batches = (await heartbeatBatches(leaderPlan.metrics)) - before;
    expect(batches).toBeGreaterThan(0);
    expect(batches).toBeLessThan(burst / 4);
  });
});

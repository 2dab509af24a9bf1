/**
 * Goal: the leader path (propose → ready → persist → advance) does work in
 * proportion to the new entries, never to the length of the log: no Ready
 * hands out an entry twice, and storage is read about once per entry (to
 * apply it), not once per step.
 * Method: a 3-node cluster pushes 30,000 entries in batches through
 * storages that count the entries they return; the counts are checked
 * against the number of entries (a deterministic measure, unlike time).
 * The throughput seen is printed for information only.
 */
import { describe, expect, it } from 'vitest';
import { NodeId, SeededRandom, type LogIndex } from '@fencer/base';
import { MemoryStorage, createRaftNode, defaultRaftConfig, type Entry, type Message, type RaftNode } from '../src/index.js';

class CountingStorage extends MemoryStorage {
  entriesRead = 0;
  override entries(lo: LogIndex, hi: LogIndex, maxBytes: number): Entry[] {
    const out = super.entries(lo, hi, maxBytes);
    this.entriesRead += out.length;
    return out;
  }
}

describe('performance of the leader path', () => {
  it('reads and persists each entry a bounded number of times, however long the log grows', () => {
    const ids = ['a', 'b', 'c'].map(NodeId);
    const rnd = new SeededRandom(3);
    const nodes = new Map<string, { node: RaftNode; storage: CountingStorage; persisted: number }>();
    for (const id of ids) {
      const storage = new CountingStorage();
      nodes.set(id, { storage, persisted: 0, node: createRaftNode(defaultRaftConfig({ id, storage, random: rnd.fork(), peers: ids })) });
    }
    let queue: Message[] = [];
    const pump = (): void => {
      for (let round = 0; round < 100; round++) {
        for (const n of nodes.values()) {
          while (n.node.hasReady()) {
            const rd = n.node.ready();
            n.storage.append(rd.entries);
            n.persisted += rd.entries.length;
            if (rd.hardState !== undefined) n.storage.setHardState(rd.hardState);
            queue.push(...rd.messages);
            n.node.advance();
          }
        }
        if (queue.length === 0) return;
        const batch = queue;
        queue = [];
        for (const m of batch) nodes.get(m.to)?.node.step(m);
      }
    };
    const leader = nodes.get('a') as { node: RaftNode; storage: CountingStorage };
    leader.node.campaign();
    pump();
    expect(leader.node.status().role).toBe('leader');
    for (const n of nodes.values()) {
      n.storage.entriesRead = 0;
      n.persisted = 0;
    }

    const total = 30_000;
    const data = new Uint8Array(64);
    const started = performance.now();
    let refused = 0;
    for (let i = 0; i < total / 100; i++) {
      for (let k = 0; k < 100; k++) if (leader.node.propose(data) === null) refused++;
      pump();
      leader.node.tick();
    }
    expect(refused).toBe(0);
    // The last commit reaches the followers with the next heartbeat (broadcastCommit is off by default).
    leader.node.tick();
    pump();
    const ms = performance.now() - started;
    console.info(`leader path: ${total} entries through 3 nodes in ${ms.toFixed(0)} ms (${Math.round((total / ms) * 1000)} entries/s)`);

    console.info(`entries read from storage per node: ${[...nodes.values()].map((n) => n.storage.entriesRead).join(', ')}`);
    for (const [id, n] of nodes) {
      expect(n.node.status().commit).toBe(leader.node.status().lastIndex);
      // Every entry is persisted once per node...
      expect(n.persisted, id).toBe(total);
      // ...and read back from storage about once (to apply it), with slack for heartbeat-driven resends.
      expect(n.storage.entriesRead, id).toBeLessThanOrEqual(total * 1.1);
    }
  });
});

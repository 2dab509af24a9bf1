/**
 * Goal: the Raft core stays pure — no clock, timer, unseeded randomness,
 * node: module or third-party import in its sources — and it is
 * deterministic: the same seed and inputs give the same outputs.
 * Method: scan every non-test source file in src/ with the purity scanners
 * of @fencer/base; then run one scripted cluster twice with the same seed
 * and compare a digest of everything the nodes emitted.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NodeId, SeededRandom, findForbiddenTokens, findForeignImports } from '@fencer/base';
import { MemoryStorage, createRaftNode, defaultRaftConfig, type Message, type RaftNode } from './index.js';

const srcDir = path.dirname(fileURLToPath(import.meta.url));
const sources = readdirSync(srcDir).filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'));

describe('purity of libs/raft/src', () => {
  it('finds the sources to scan', () => {
    expect(sources).toContain('raft.ts');
    expect(sources.length).toBeGreaterThan(8);
  });

  it.each(sources)('%s uses no clock, timer, unseeded randomness or node: module', (file) => {
    expect(findForbiddenTokens(readFileSync(path.join(srcDir, file), 'utf8'))).toEqual([]);
  });

  it.each(sources)('%s imports only relative files and @fencer/base', (file) => {
    expect(findForeignImports(readFileSync(path.join(srcDir, file), 'utf8'), ['@fencer/base'])).toEqual([]);
  });

  it('the scanners do flag what they must (so a pass means something)', () => {
    expect(findForbiddenTokens('const t = Date.now();')).toHaveLength(1);
    expect(findForeignImports("import x from 'node:fs';", ['@fencer/base'])).toHaveLength(1);
  });
});

/** Runs a 3-node cluster for `ticks` with proposals and a lossy network; returns a digest of all output. */
function runCluster(seed: number, ticks: number): string {
  const rnd = new SeededRandom(seed);
  const ids = ['a', 'b', 'c'].map(NodeId);
  const nodes = new Map<string, { node: RaftNode; storage: MemoryStorage }>();
  for (const id of ids) {
    const storage = new MemoryStorage();
    nodes.set(id, { storage, node: createRaftNode(defaultRaftConfig({ id, storage, random: rnd.fork(), peers: ids })) });
  }
  let digest = 0;
  const mix = (s: string): void => {
    for (let i = 0; i < s.length; i++) digest = (Math.imul(digest, 31) + s.charCodeAt(i)) >>> 0;
  };
  let inFlight: Message[] = [];
  for (let t = 0; t < ticks; t++) {
    for (const { node } of nodes.values()) node.tick();
    if (t % 3 === 0) for (const { node } of nodes.values()) node.propose(Uint8Array.of(t & 255));
    for (let round = 0; round < 20; round++) {
      const next: Message[] = [];
      for (const [id, { node, storage }] of nodes) {
        while (node.hasReady()) {
          const rd = node.ready();
          if (rd.snapshot) storage.applySnapshot(rd.snapshot);
          storage.append(rd.entries);
          if (rd.hardState) storage.setHardState(rd.hardState);
          mix(`${id}:${JSON.stringify(rd.hardState ?? null)}:${rd.entries.length}:${rd.committedEntries.map((e) => e.index).join(',')}`);
          next.push(...rd.messages);
          node.advance();
        }
      }
      for (const m of inFlight) {
        mix(`${m.type}${m.from}${m.to}${m.term}`);
        if (!rnd.chance(0.1)) nodes.get(m.to)?.node.step(m);
      }
      inFlight = next;
      if (inFlight.length === 0) break;
    }
  }
  return `${digest}:${[...nodes.values()].map((n) => n.node.status().commit).join(',')}`;
}

describe('determinism', () => {
  it('the same seed gives the same run; a different seed a different one', () => {
    const a = runCluster(5, 300);
    expect(runCluster(5, 300)).toBe(a);
    expect(runCluster(6, 300)).not.toBe(a);
  });
});

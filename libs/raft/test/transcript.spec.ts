/**
 * Goal: whole interactions read like the protocol: who sends what to whom,
 * and where every node ends up. A change in behaviour shows as a diff of
 * a small text file.
 * Method: each test/transcripts/*.txt holds commands (lines starting with
 * "> ") each followed by its expected output; the runner replays them on a
 * seeded in-memory network and compares. RAFT_TRANSCRIPT_REWRITE=1
 * rewrites the files with the actual output (review every rewrite diff).
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NodeId } from '@fencer/base';
import { ConfChangeType, type Message } from '../src/index.js';
import { bytes, Network } from './network.js';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'transcripts');
const rewrite = process.env['RAFT_TRANSCRIPT_REWRITE'] === '1';

function describeMessage(m: Message): string {
  const parts = [`${m.from}->${m.to} ${m.type} t${m.term}`];
  if (m.index !== undefined) parts.push(`i${m.index}${m.logTerm !== undefined ? `/t${m.logTerm}` : ''}`);
  if (m.entries !== undefined && m.entries.length > 0) parts.push(`entries=[${m.entries.map((e) => `${e.index}/t${e.term}`).join(' ')}]`);
  if (m.commit !== undefined) parts.push(`commit=${m.commit}`);
  if (m.reject === true) parts.push(`reject hint=${m.rejectHint ?? '-'}/t${m.rejectTerm ?? '-'}`);
  if (m.context !== undefined) parts.push(`ctx=${m.context}`);
  if (m.transfer === true) parts.push('transfer');
  if (m.snapshotMeta !== undefined)
    parts.push(
      `snap=${m.snapshotMeta.index}/t${m.snapshotMeta.term} off=${m.snapshotOffset ?? '-'}${m.snapshotDone === true ? ' done' : ''}`,
    );
  return parts.join(' ');
}

function run(script: string): string {
  let net: Network | undefined;
  const out: string[] = [];
  const need = (): Network => {
    if (net === undefined) throw new Error('start with: cluster <ids...>');
    return net;
  };
  const settle = (): void => {
    const n = need();
    n.recordSent = true;
    n.sent = [];
    n.stabilize();
    for (const m of n.sent) out.push(describeMessage(m));
    n.sent = [];
  };
  for (const line of script.split('\n')) {
    if (!line.startsWith('> ')) {
      if (line.startsWith('#') || (line.trim() === '' && out.at(-1) !== '')) out.push(line);
      continue;
    }
    out.push(line);
    const [cmd, ...args] = line.slice(2).trim().split(/\s+/);
    const n = cmd === 'cluster' ? undefined : need();
    switch (cmd) {
      case 'cluster': {
        const flags = args.filter((a) => a.includes('='));
        const ids = args.filter((a) => !a.includes('='));
        const config: Record<string, boolean> = {};
        for (const f of flags) {
          const [k, v] = f.split('=');
          config[k as string] = v === 'true';
        }
        net = new Network({ ids, seed: 1, config });
        net.stabilize();
        break;
      }
      case 'campaign':
        n?.get(args[0] as string).node.campaign();
        settle();
        break;
      case 'tick':
        for (let i = 0; i < Number(args[1] ?? 1); i++) n?.get(args[0] as string).node.tick();
        settle();
        break;
      case 'propose': {
        const index = n?.get(args[0] as string).node.propose(bytes(args[1] ?? ''));
        out.push(index === null ? 'refused' : `index ${index}`);
        settle();
        break;
      }
      case 'read': {
        const node = n?.get(args[0] as string);
        out.push(node?.node.readIndex(args[1] as string) === true ? 'accepted' : 'refused');
        settle();
        for (const rs of node?.readStates.splice(0) ?? []) out.push(`read ${rs.requestCtx} at ${rs.index}`);
        break;
      }
      case 'add-learner':
      case 'add-voter':
      case 'remove': {
        if (args[1] !== undefined && n !== undefined && !n.nodes.has(args[1])) n.addNode(args[1], undefined);
        const type =
          cmd === 'add-learner' ? ConfChangeType.AddLearner : cmd === 'add-voter' ? ConfChangeType.AddVoter : ConfChangeType.RemoveNode;
        const index = n?.get(args[0] as string).node.proposeConfChange({ type, node: NodeId(args[1] as string) });
        out.push(index === null ? 'refused' : `index ${index}`);
        settle();
        break;
      }
      case 'transfer':
        n?.get(args[0] as string).node.transferLeadership(NodeId(args[1] as string));
        settle();
        break;
      case 'isolate':
        n?.isolate(args[0] as string);
        break;
      case 'heal':
        n?.heal();
        break;
      case 'status':
        for (const node of n?.nodes.values() ?? []) {
          const s = node.node.status();
          out.push(
            `${s.id}: ${s.role} t${s.term} leader=${s.leader ?? '-'} commit=${s.commit} last=${s.lastIndex} voters=${s.voters.join(',')}${s.learners.length > 0 ? ` learners=${s.learners.join(',')}` : ''}`,
          );
        }
        break;
      default:
        throw new Error(`unknown command ${cmd}`);
    }
  }
  return out.join('\n').replace(/\n*$/, '\n');
}

const files = readdirSync(dir).filter((f) => f.endsWith('.txt'));

describe('transcripts', () => {
  it('has transcripts to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('%s', (file) => {
    const full = path.join(dir, file);
    const expected = readFileSync(full, 'utf8');
    const actual = run(expected);
    if (rewrite) writeFileSync(full, actual);
    else expect(actual).toBe(expected);
  });
});

/**
 * The Figure 8 scenario of the Raft paper, replayed message by message on
 * hand-built nodes; shared by the §5.4 test and the bug-switch test.
 */
import { expect } from 'vitest';
import { MessageType, type Message } from '../src/index.js';
import { drain, newNode, type Handle } from './helpers.js';

const five = ['1', '2', '3', '4', '5'];

/**
 * Figure 8 replayed from (c): S1 leads term 4 and brings S3 up to index 2
 * (an entry of term 2), so index 2 sits on S1, S2 and S3 — a majority —
 * while its own blank entry (index 3) reaches only S2. Then S1 crashes and
 * S5 (log [1, 3]) is elected with votes from S2, S3 and S4 and overwrites
 * index 2. Returns what each node applied, by index.
 */
export function replayFigure8(bugs: { commitPreviousTermByCounting?: boolean }): Map<string, Map<number, number>> {
  const logs: Record<string, number[]> = { '1': [1, 2], '2': [1, 2], '3': [1], '4': [1], '5': [1, 3] };
  const nodes = new Map<string, Handle>();
  for (const id of five) {
    nodes.set(id, newNode({ id, voters: five, logTerms: logs[id] ?? [], term: 3, commit: 1, maxEntriesPerMsg: 1, bugs }));
  }
  const applied = new Map<string, Map<number, number>>(five.map((id) => [id, new Map<number, number>()]));
  const get = (id: string): Handle => nodes.get(id) as Handle;
  const drainInto = (id: string): Message[] => {
    const out = drain(get(id));
    for (const e of out.committed) (applied.get(id) as Map<number, number>).set(e.index, e.term);
    return out.messages;
  };
  const deliver = (ms: Message[], keep: (m: Message) => boolean): Message[] => {
    const replies: Message[] = [];
    for (const m of ms) {
      if (!keep(m) || !nodes.has(m.to)) continue;
      get(m.to).node.step(m);
      replies.push(...drainInto(m.to));
    }
    return replies;
  };

  // (c) S1 is elected in term 4 (S5's log is more up-to-date and refuses).
  get('1').node.campaign();
  let replies = deliver(drainInto('1'), () => true);
  // S1's own answers to the votes are its first appends.
  const out = deliver(replies, () => true);
  expect(get('1').node.status()).toMatchObject({ role: 'leader', term: 4 });
  // S1's appends reach only S2 and S3. S2 already holds index 2 and takes index 3; S3 refuses the probe,
  // then gets index 2 alone (one entry per message). Index 2 is then on S1, S2 and S3: a majority.
  const toS3 = (m: Message): boolean => (m.to === '3' || m.to === '2') && m.type === MessageType.AppendEntries;
  let pending = out;
  for (let round = 0; round < 4; round++) {
    replies = deliver(pending, toS3);
    const acked = replies.some((r) => r.type === MessageType.AppendEntriesResponse && r.reject !== true && r.index === 2);
    pending = deliver(replies, () => true);
    if (acked) break;
  }
  expect(get('1').node.status().progress?.['3']?.match).toBe(2);
  // (d) S1 crashes before index 3 goes anywhere; S5 campaigns in term 5 and wins with S2, S3, S4.
  nodes.delete('1');
  get('5').node.campaign();
  let wave = drainInto('5');
  for (let round = 0; round < 20 && wave.length > 0; round++) wave = deliver(wave, () => true);
  expect(get('5').node.status()).toMatchObject({ role: 'leader', term: 5 });
  return applied;
}

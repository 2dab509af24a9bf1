/**
 * Partition shapes over the directed peer links of a cell, as sets of links
 * to cut. Pure: the nemesis picks a shape, the mesh applies it. The shapes
 * are the usual ones from Jepsen's nemeses: an isolated node (the leader),
 * a majority against a minority, a bridge (two sides that only a middle node
 * joins), a ring (each node sees only its two neighbours), and one-way cuts.
 */
import { assert, type Random } from '@fencer/base';

/** A directed link: messages `from` → `to`. */
export interface Link {
  readonly from: string;
  readonly to: string;
}

export type PartitionShape = 'isolate' | 'majority-minority' | 'bridge' | 'ring' | 'one-way';

export interface Partition {
  readonly shape: PartitionShape;
  /** Human-readable, for the fault schedule. */
  readonly description: string;
  readonly cut: readonly Link[];
}

function both(a: string, b: string): Link[] {
  return [
    { from: a, to: b },
    { from: b, to: a },
  ];
}

/** Every link between a node of `left` and one of `right`, both ways. */
function between(left: readonly string[], right: readonly string[]): Link[] {
  const out: Link[] = [];
  for (const a of left) for (const b of right) out.push(...both(a, b));
  return out;
}

/** One node cut off from every other. */
export function isolate(nodes: readonly string[], victim: string): Partition {
  assert(nodes.includes(victim), `isolate: ${victim} is a member`);
  const others = nodes.filter((n) => n !== victim);
  return { shape: 'isolate', description: `isolate ${victim}`, cut: between([victim], others) };
}

/** A random minority (⌊n/2⌋ nodes, the leader among them when given) against the majority. */
export function majorityMinority(nodes: readonly string[], random: Random, leaderInMinority?: string): Partition {
  const shuffled = random.shuffle([...nodes]);
  const minoritySize = Math.floor(nodes.length / 2);
  let minority = shuffled.slice(0, minoritySize);
  if (leaderInMinority && !minority.includes(leaderInMinority)) minority = [leaderInMinority, ...minority.slice(0, minoritySize - 1)];
  const majority = nodes.filter((n) => !minority.includes(n));
  assert(majority.length > minority.length, 'the majority side is larger');
  return {
    shape: 'majority-minority',
    description: `minority [${minority.join(',')}] | majority [${majority.join(',')}]`,
    cut: between(minority, majority),
  };
}

/** Two halves that cannot talk, and one bridge node that talks to both. */
export function bridge(nodes: readonly string[], random: Random): Partition {
  assert(nodes.length >= 3, 'a bridge needs three nodes');
  const shuffled = random.shuffle([...nodes]);
  const middle = shuffled[0]!;
  const rest = shuffled.slice(1);
  const left = rest.slice(0, Math.floor(rest.length / 2));
  const right = rest.slice(Math.floor(rest.length / 2));
  return { shape: 'bridge', description: `[${left.join(',')}] - ${middle} - [${right.join(',')}]`, cut: between(left, right) };
}

/** A random cyclic order; each node keeps only the links to its two neighbours. */
export function ring(nodes: readonly string[], random: Random): Partition {
  assert(nodes.length >= 4, 'a ring cuts something only with four nodes or more');
  const order = random.shuffle([...nodes]);
  const n = order.length;
  const neighbours = (i: number, j: number): boolean => Math.abs(i - j) === 1 || Math.abs(i - j) === n - 1;
  const cut: Link[] = [];
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) if (i !== j && !neighbours(i, j)) cut.push({ from: order[i]!, to: order[j]! });
  return { shape: 'ring', description: `ring ${order.join('-')}-${order[0]}`, cut };
}

/**
 * One-way: `sender` cannot reach the given targets, but hears from them (a
 * leader that cannot send is the classic case: it still receives votes and
 * answers, and must step down by check-quorum).
 */
export function oneWay(sender: string, targets: readonly string[]): Partition {
  assert(targets.length > 0 && !targets.includes(sender), 'one-way: targets are other nodes');
  return { shape: 'one-way', description: `${sender} -/-> [${targets.join(',')}]`, cut: targets.map((to) => ({ from: sender, to })) };
}

/** Whether `from` can send to `to` under a partition. */
export function connected(p: Partition, from: string, to: string): boolean {
  return !p.cut.some((l) => l.from === from && l.to === to);
}

/**
 * Partition shapes. Each returns the directed links to cut; the network
 * drops every message on a cut link, including ones already in flight.
 */
import type { NodeId, Random } from '@fencer/base';

export type Link = readonly [NodeId, NodeId];

export const PARTITION_SHAPES = [
  'isolate-leader',
  'isolate-node',
  'minority-majority',
  'bridge',
  'one-way-leader-out',
  'one-way-leader-in',
  'one-way-random',
] as const;
export type PartitionShape = (typeof PARTITION_SHAPES)[number];

export interface Partition {
  readonly shape: PartitionShape;
  readonly links: readonly Link[];
  /** For logs: the sides, as the shape sees them. */
  readonly describe: string;
}

/** Cuts every link between the two groups, both ways unless oneWay. */
export function cutBetween(a: readonly NodeId[], b: readonly NodeId[], oneWay = false): Link[] {
  const links: Link[] = [];
  for (const x of a) {
    for (const y of b) {
      if (x === y) continue;
      links.push([x, y]);
      if (!oneWay) links.push([y, x]);
    }
  }
  return links;
}

export function makePartition(shape: PartitionShape, nodes: readonly NodeId[], leader: NodeId | null, random: Random): Partition {
  const all = [...nodes];
  const pivot = leader !== null && all.includes(leader) ? leader : random.pick(all);
  const others = all.filter((n) => n !== pivot);
  switch (shape) {
    case 'isolate-leader':
      return { shape, links: cutBetween([pivot], others), describe: `${pivot} | ${others.join(',')}` };
    case 'isolate-node': {
      const node = random.pick(all);
      const rest = all.filter((n) => n !== node);
      return { shape, links: cutBetween([node], rest), describe: `${node} | ${rest.join(',')}` };
    }
    case 'minority-majority': {
      const shuffled = random.shuffle([...all]);
      const minority = shuffled.slice(0, random.range(1, Math.max(1, Math.floor((all.length - 1) / 2))));
      const majority = shuffled.filter((n) => !minority.includes(n));
      // Half the time the old leader lands in the minority, to force a new term on the other side.
      if (leader !== null && random.chance(0.5) && majority.includes(leader) && minority.length > 0) {
        const swap = minority[0] as NodeId;
        minority[0] = leader;
        majority[majority.indexOf(leader)] = swap;
      }
      return { shape, links: cutBetween(minority, majority), describe: `${minority.join(',')} | ${majority.join(',')}` };
    }
    case 'bridge': {
      // Two halves that cannot talk, and one node that talks to both.
      const shuffled = random.shuffle([...all]);
      const bridge = shuffled[0] as NodeId;
      const rest = shuffled.slice(1);
      const half = Math.ceil(rest.length / 2);
      const a = rest.slice(0, half);
      const b = rest.slice(half);
      return { shape, links: cutBetween(a, b), describe: `${a.join(',')} <${bridge}> ${b.join(',')}` };
    }
    case 'one-way-leader-out':
      // The leader's messages are lost but it hears everyone: it keeps its term while others elect.
      return { shape, links: cutBetween([pivot], others, true), describe: `${pivot} -/-> ${others.join(',')}` };
    case 'one-way-leader-in':
      return { shape, links: cutBetween(others, [pivot], true), describe: `${others.join(',')} -/-> ${pivot}` };
    case 'one-way-random': {
      const links: Link[] = [];
      for (const x of all) for (const y of all) if (x !== y && random.chance(0.3)) links.push([x, y]);
      return { shape, links, describe: `${links.length} random one-way cuts` };
    }
  }
}

import { describe, expect, it } from 'vitest';
import { Network } from './network.js';

describe('smoke', () => {
  it('elects and replicates', () => {
    const net = new Network({ ids: ['a', 'b', 'c'], seed: 7 });
    const l = net.waitLeader();
    expect(l).toBeDefined();
    const idx = net.one('x', 3);
    expect(net.nApplied(idx)).toEqual({ count: 3, command: 'x' });
    for (let i = 0; i < 50; i++) net.one(`c${i}`, 3);
  });
});

/**
 * NodeDisk's fdatasync placement (NodeDiskOptions.syncOnLoop): on the event
 * loop (in a microtask, or after the loop polls for I/O) when the policy
 * says so and no other sync of the file is out, else on libuv's thread
 * pool; `done` never runs inside the call either way.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DiskFile } from '../src/disk.js';
import { NodeDisk } from '../src/node.js';

let tmp = '';
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fencer-nodedisk-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const open = (disk: NodeDisk, name: string): Promise<DiskFile> =>
  new Promise((resolve, reject) => disk.open(path.join(tmp, name), 'create', (err, f) => (err ? reject(err) : resolve(f!))));
const call = (fn: (done: (err: Error | null) => void) => void): Promise<void> =>
  new Promise((resolve, reject) => fn((err) => (err ? reject(err) : resolve())));

describe('NodeDisk sync placement', () => {
  it('without syncOnLoop every sync goes to the pool', async () => {
    const disk = new NodeDisk();
    const f = await open(disk, 'pool');
    await call((d) => f.write(0, new Uint8Array([1, 2, 3]), d));
    await call((d) => f.sync(d));
    await call((d) => f.sync(d));
    expect(disk.stats).toEqual({ syncsOnLoop: 0, syncsInPool: 2 });
    await call((d) => f.close(d));
  });

  it('syncs on the loop when asked, completing after the call returns, and the bytes are in the file', async () => {
    const asked: number[] = [];
    const disk = new NodeDisk({ syncOnLoop: (idleMs) => (asked.push(idleMs), 'loop') });
    const f = await open(disk, 'loop');
    await call((d) => f.write(0, new Uint8Array([7, 8, 9]), d));
    let doneInside = true;
    let finished = false;
    const p = new Promise<void>((resolve) =>
      f.sync((err) => {
        expect(err).toBeNull();
        finished = true;
        resolve();
      }),
    );
    doneInside = finished;
    await p;
    expect(doneInside).toBe(false);
    expect(disk.stats).toEqual({ syncsOnLoop: 1, syncsInPool: 0 });
    expect(asked).toHaveLength(1);
    expect([...fs.readFileSync(path.join(tmp, 'loop'))]).toEqual([7, 8, 9]);
    await call((d) => f.close(d));
  });

  it('a sync started while another is out goes to the pool without asking, and both complete in call order', async () => {
    let asks = 0;
    const disk = new NodeDisk({ syncOnLoop: () => (asks++, 'loop') });
    const f = await open(disk, 'overlap');
    await call((d) => f.write(0, new Uint8Array(100), d));
    const order: string[] = [];
    await Promise.all([call((d) => f.sync(d)).then(() => order.push('first')), call((d) => f.sync(d)).then(() => order.push('second'))]);
    expect(asks).toBe(1);
    expect(disk.stats).toEqual({ syncsOnLoop: 1, syncsInPool: 1 });
    expect(order).toEqual(['first', 'second']);
    await call((d) => f.close(d));
  });

  it("passes the time since the file's last sync ended, and how long that sync took", async () => {
    const asked: Array<[number, number]> = [];
    const disk = new NodeDisk({ syncOnLoop: (idleMs, lastSyncMs) => (asked.push([idleMs, lastSyncMs]), 'pool') });
    const f = await open(disk, 'idle');
    const started = performance.now();
    await call((d) => f.sync(d));
    const ended = performance.now();
    await new Promise((r) => setTimeout(r, 30));
    const waited = performance.now() - ended;
    await call((d) => f.sync(d));
    expect(asked).toHaveLength(2);
    expect(asked[0]![1]).toBe(0);
    expect(asked[1]![0]).toBeGreaterThanOrEqual(waited);
    expect(asked[1]![0]).toBeLessThan(waited + 1000);
    expect(asked[1]![1]).toBeGreaterThan(0);
    expect(asked[1]![1]).toBeLessThanOrEqual(ended - started);
    await call((d) => f.close(d));
  });

  it('loop runs before the next turn of the event loop, loop-after-io only after it', async () => {
    for (const place of ['loop', 'loop-after-io'] as const) {
      const disk = new NodeDisk({ syncOnLoop: () => place });
      const f = await open(disk, `order-${place}`);
      const order: string[] = [];
      const turn = new Promise<void>((resolve) => setImmediate(() => (order.push('turn'), resolve())));
      await Promise.all([call((d) => f.sync(d)).then(() => order.push('synced')), turn]);
      expect(order).toEqual(place === 'loop' ? ['synced', 'turn'] : ['turn', 'synced']);
      expect(disk.stats).toEqual({ syncsOnLoop: 1, syncsInPool: 0 });
      await call((d) => f.close(d));
    }
  });
});

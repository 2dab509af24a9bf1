/**
 * Goal: each fault of the link proxy does what the nemesis relies on: bytes
 * pass when healed; a cut swallows them silently (no reset) and the heal
 * resets the poisoned connection; a one-way cut loses one direction only;
 * a delay holds chunks back in order; drop resets connections; partition
 * shapes cut the links they should.
 * Method: an echo server on 127.0.0.1 behind a LinkProxy, raw sockets as the
 * dialling side; partitions checked as sets of directed links.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SeededRandom } from '@fencer/base';
import { LinkProxy } from '../src/proxy.js';
import { bridge, connected, isolate, majorityMinority, oneWay, ring } from '../src/partitions.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** An echo server that also counts what it received. */
async function echoServer(): Promise<{ port: number; received: () => number }> {
  let received = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('data', (d) => {
      received += d.length;
      s.write(d);
    });
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { port: (server.address() as net.AddressInfo).port, received: () => received };
}

async function proxyTo(port: number): Promise<LinkProxy> {
  const p = new LinkProxy('test', '127.0.0.1', port, new SeededRandom(7));
  await p.start();
  cleanups.push(() => p.close());
  return p;
}

/** A client socket that collects what comes back and notes how it ended. */
async function dial(port: number): Promise<{ socket: net.Socket; got: () => string; ended: Promise<string> }> {
  const socket = net.connect({ host: '127.0.0.1', port });
  let got = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (got += d));
  const ended = new Promise<string>((resolve) => {
    socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    socket.on('close', () => resolve('closed'));
  });
  await new Promise<void>((r) => socket.once('connect', () => r()));
  cleanups.push(() => {
    socket.destroy();
  });
  return { socket, got: () => got, ended };
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 5));
  }
  return check();
}

describe('LinkProxy', () => {
  it('passes bytes both ways when healed', async () => {
    const echo = await echoServer();
    const p = await proxyTo(echo.port);
    const c = await dial(p.port);
    c.socket.write('hello');
    expect(await until(() => c.got() === 'hello', 2_000)).toBe(true);
  });

  it('a cut swallows bytes without resetting; the heal resets the poisoned connection and new ones work', async () => {
    const echo = await echoServer();
    const p = await proxyTo(echo.port);
    const c = await dial(p.port);
    p.setFault({ cutUp: true, cutDown: true });
    c.socket.write('lost');
    await new Promise((r) => setTimeout(r, 200));
    expect(echo.received()).toBe(0);
    expect(c.got()).toBe('');
    expect(c.socket.destroyed).toBe(false);
    p.heal();
    expect(await c.ended).toMatch(/ECONNRESET|closed/);
    const d = await dial(p.port);
    d.socket.write('again');
    expect(await until(() => d.got() === 'again', 2_000)).toBe(true);
  });

  it('a one-way cut of the answers lets requests through and loses the replies', async () => {
    const echo = await echoServer();
    const p = await proxyTo(echo.port);
    const c = await dial(p.port);
    p.setFault({ cutDown: true });
    c.socket.write('ping');
    expect(await until(() => echo.received() === 4, 2_000)).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(c.got()).toBe('');
  });

  it('a delay holds chunks back at least delayMs and keeps their order', async () => {
    const echo = await echoServer();
    const p = await proxyTo(echo.port);
    const c = await dial(p.port);
    p.setFault({ delayMs: 150, jitterMs: 50 });
    const started = performance.now();
    for (const part of ['a', 'b', 'c', 'd']) c.socket.write(part);
    expect(await until(() => c.got().length === 4, 3_000)).toBe(true);
    // Each direction is delayed: at least 2 × 150 ms for the round trip.
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(c.got()).toBe('abcd');
  });

  it('a delay with jitter never reorders: many small chunks come back in the order sent (found by the chaos harness: reordered HTTP/2 frames reordered watch events)', async () => {
    const echo = await echoServer();
    const p = await proxyTo(echo.port);
    const c = await dial(p.port);
    p.setFault({ delayMs: 2, jitterMs: 30 });
    const sent: string[] = [];
    for (let i = 0; i < 300; i++) {
      const part = `${String(i).padStart(3, '0')};`;
      sent.push(part);
      c.socket.write(part);
      if (i % 3 === 0) await new Promise((r) => setImmediate(r));
    }
    expect(await until(() => c.got().length === sent.join('').length, 5_000)).toBe(true);
    expect(c.got()).toBe(sent.join(''));
  });

  it('drop resets connections that carry data', async () => {
    const echo = await echoServer();
    const p = await proxyTo(echo.port);
    const c = await dial(p.port);
    p.setFault({ dropRate: 1 });
    c.socket.write('x');
    expect(await c.ended).toMatch(/ECONNRESET|closed/);
    expect(echo.received()).toBe(0);
  });
});

describe('partition shapes', () => {
  const nodes = ['n1', 'n2', 'n3', 'n4', 'n5'];
  const rnd = (): SeededRandom => new SeededRandom(11);

  it('isolate cuts every link of the victim, both ways, and nothing else', () => {
    const p = isolate(nodes, 'n3');
    expect(p.cut).toHaveLength(8);
    for (const other of ['n1', 'n2', 'n4', 'n5']) {
      expect(connected(p, 'n3', other)).toBe(false);
      expect(connected(p, other, 'n3')).toBe(false);
    }
    expect(connected(p, 'n1', 'n2')).toBe(true);
  });

  it('majority/minority splits 3 against 2 and can put a given node in the minority', () => {
    const p = majorityMinority(nodes, rnd(), 'n1');
    expect(p.cut).toHaveLength(2 * 3 * 2);
    const reach = nodes.filter((n) => n !== 'n1' && connected(p, 'n1', n));
    expect(reach).toHaveLength(1);
  });

  it('bridge: the middle node reaches everyone, the two sides do not reach each other', () => {
    const p = bridge(nodes, rnd());
    const middle = nodes.find((m) => nodes.every((o) => o === m || (connected(p, m, o) && connected(p, o, m))));
    expect(middle).toBeDefined();
    expect(p.cut).toHaveLength(2 * 2 * 2);
  });

  it('ring: every node keeps exactly two neighbours', () => {
    const p = ring(nodes, rnd());
    for (const n of nodes) expect(nodes.filter((o) => o !== n && connected(p, n, o))).toHaveLength(2);
  });

  it('one-way: the sender cannot reach the targets, but hears from them', () => {
    const p = oneWay('n1', ['n2', 'n3']);
    expect(connected(p, 'n1', 'n2')).toBe(false);
    expect(connected(p, 'n2', 'n1')).toBe(true);
    expect(connected(p, 'n1', 'n4')).toBe(true);
  });
});

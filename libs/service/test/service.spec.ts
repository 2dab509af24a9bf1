/**
 * Goal: the parts of @fencer/service that need no process of their own:
 * the option parsers refuse what a process cannot run with, in words a
 * person can act on; the metrics endpoint serves the registry at /metrics,
 * the liveness and readiness probes at /livez and /readyz (200 "ok", or 503
 * with the check's reason, as the check answers at the time of the request),
 * and nothing else; the logger takes its level from the option, then
 * FENCER_LOG_LEVEL; writeBeforeExit gets its text through a non-blocking
 * pipe that is full (EAGAIN), and gives up on a reader that never reads.
 * Method: the parsers on literal values; serveMetrics on 127.0.0.1:0 asked
 * with fetch; loggers built and inspected, never written to; a FIFO opened
 * non-blocking, whose reader (cat, to a file) starts late or never.
 */
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, rmSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Counter, Registry } from 'prom-client';
import { address, createLogger, notReady, PROBE_OK, type ProbeResult, positiveInt, serveMetrics, writeBeforeExit } from '../src/index.js';

describe('option parsers', () => {
  it('address takes host:port and names the flag when it refuses', () => {
    expect(address('--listen')('127.0.0.1:6001')).toBe('127.0.0.1:6001');
    expect(address('--listen')('[::1]:6001')).toBe('[::1]:6001');
    expect(() => address('--listen')('6001')).toThrow('--listen must be host:port, e.g. 127.0.0.1:6001');
    expect(() => address('--listen')('http://h:1')).toThrow(/host:port/);
  });

  it('positiveInt takes integers from its minimum up', () => {
    expect(positiveInt('--n')('1')).toBe(1);
    expect(positiveInt('--n', 5)('5')).toBe(5);
    for (const bad of ['0', '-1', '1.5', 'x', '9007199254740993'])
      expect(() => positiveInt('--n')(bad), bad).toThrow('--n must be an integer >= 1');
    expect(() => positiveInt('--n', 5)('4')).toThrow('--n must be an integer >= 5');
  });
});

describe('serveMetrics', () => {
  let close: (() => void) | undefined;
  afterEach(() => close?.());

  it('serves the registry at /metrics, and 404 elsewhere', async () => {
    const registry = new Registry();
    new Counter({ name: 'fencer_test_total', help: 'a test counter', registers: [registry] }).inc(3);
    const server = await serveMetrics('127.0.0.1:0', registry);
    close = () => server.close();
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(registry.contentType);
    expect(await res.text()).toContain('fencer_test_total 3');
    const elsewhere = await fetch(`${base}/`);
    expect(elsewhere.status).toBe(404);
    expect(await elsewhere.text()).toMatch(/try \/metrics/);
  });

  it('answers /livez and /readyz from the checks it was given, as they answer now', async () => {
    let readiness: ProbeResult = notReady('no routing table yet');
    const server = await serveMetrics('127.0.0.1:0', new Registry(), { ready: () => readiness });
    close = () => server.close();
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const live = await fetch(`${base}/livez`);
    expect([live.status, await live.text()]).toEqual([200, 'ok\n']);
    const notYet = await fetch(`${base}/readyz`);
    expect([notYet.status, await notYet.text()]).toEqual([503, 'no routing table yet\n']);
    readiness = PROBE_OK;
    const ready = await fetch(`${base}/readyz?verbose`);
    expect([ready.status, await ready.text()]).toEqual([200, 'ok\n']);
  });

  it('is ready and live without checks, and a check that throws is a 503 naming the error', async () => {
    const plain = await serveMetrics('127.0.0.1:0', new Registry());
    const failing = await serveMetrics('127.0.0.1:0', new Registry(), {
      live: () => {
        throw new Error('replica gone');
      },
    });
    close = () => {
      plain.close();
      failing.close();
    };
    const at = (s: typeof plain, p: string) => fetch(`http://127.0.0.1:${(s.address() as AddressInfo).port}${p}`);
    expect((await at(plain, '/readyz')).status).toBe(200);
    expect((await at(plain, '/livez')).status).toBe(200);
    const res = await at(failing, '/livez');
    expect([res.status, await res.text()]).toEqual([503, 'probe failed: replica gone\n']);
    expect((await at(failing, '/readyz')).status).toBe(200);
  });

  it('rejects when the address is taken', async () => {
    const first = await serveMetrics('127.0.0.1:0', new Registry());
    close = () => first.close();
    const taken = `127.0.0.1:${(first.address() as AddressInfo).port}`;
    await expect(serveMetrics(taken, new Registry())).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});

describe('createLogger', () => {
  const saved = process.env['FENCER_LOG_LEVEL'];
  afterEach(() => {
    if (saved === undefined) delete process.env['FENCER_LOG_LEVEL'];
    else process.env['FENCER_LOG_LEVEL'] = saved;
  });

  it('takes its level from the option, else FENCER_LOG_LEVEL, else info', () => {
    delete process.env['FENCER_LOG_LEVEL'];
    expect(createLogger('a').level).toBe('info');
    process.env['FENCER_LOG_LEVEL'] = 'debug';
    expect(createLogger('a').level).toBe('debug');
    expect(createLogger('a', { level: 'warn', sync: true }).level).toBe('warn');
  });
});

describe('writeBeforeExit', () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A FIFO held open read-write and non-blocking, as a pipe whose buffer fills at 64 KiB. */
  const fifo = (): { file: string; fd: number } => {
    dir = mkdtempSync(path.join(tmpdir(), 'service-'));
    const file = path.join(dir, 'pipe');
    execFileSync('mkfifo', [file]);
    return { file, fd: openSync(file, constants.O_RDWR | constants.O_NONBLOCK) };
  };

  it('writes all of its text through a full pipe whose reader starts late', async () => {
    const { file, fd } = fifo();
    const out = path.join(dir, 'out');
    // The reader is up before the write starts (writeBeforeExit's second counts from its start); it still
    // starts reading after the writer filled the pipe's 64 KiB, so the writer meets EAGAIN.
    const reader = spawn('sh', ['-c', `echo started; sleep 0.05; exec cat "${file}" > "${out}"`], { stdio: ['ignore', 'pipe', 'ignore'] });
    await new Promise((resolve) => reader.stdout.once('data', resolve));
    const text = 'x'.repeat(1 << 20);
    writeBeforeExit(fd, text);
    closeSync(fd); // the reader's end of file: no writer is left
    await new Promise((resolve) => reader.on('close', resolve));
    expect(statSync(out).size).toBe(text.length);
  });

  it('gives up after about a second of a reader that takes nothing', () => {
    const { fd } = fifo();
    const started = performance.now();
    writeBeforeExit(fd, 'x'.repeat(1 << 20));
    const tookMs = performance.now() - started;
    closeSync(fd);
    expect(tookMs).toBeGreaterThanOrEqual(1_000);
    expect(tookMs).toBeLessThan(5_000);
  });
});

/**
 * Goal: the probes of the front ends on their metrics port: a cell router
 * and a session proxy are live while they run, and ready only once they hold
 * a routing table: from the routing file at once; following a control plane
 * that does not answer, never (503 with the reason), while still live.
 * Method: @fencer/fleet starts one cell, a router and a proxy on a routing
 * file; then a router and a proxy are spawned with --control-plane naming a
 * 127.0.0.1 port where nothing listens. The probes are asked over HTTP,
 * polling until the expected answer (generous timeouts), and the not-ready
 * answer is checked to stay so across several polls.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@fencer/fleet/contract';
import { CELL_ROUTER_MAIN, SESSION_PROXY_MAIN } from '@fencer/fleet';
import { freePortBase, releasePorts, startTestFleet, type TestFleet } from '@fencer/fleet/testing';

let fleet: TestFleet;
const spawned: ChildProcess[] = [];

beforeAll(async () => {
  fleet = await startTestFleet({ cells: 1, replicas: 3, routers: 1, proxies: 1, routes: { alpha: 'cell-1' } });
}, 180_000);
afterAll(async () => {
  for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
  await fleet?.stop();
});

type Answer = { status: number; body: string };

async function ask(base: string, path: string): Promise<Answer> {
  try {
    const res = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(5_000) });
    return { status: res.status, body: await res.text() };
  } catch {
    return { status: 0, body: '' };
  }
}

function until(base: string, path: string, accept: (a: Answer) => boolean, what: string): Promise<Answer> {
  return eventually(
    async () => {
      const a = await ask(base, path);
      return accept(a) ? a : undefined;
    },
    60_000,
    `${base}${path}: ${what}`,
  );
}

describe('front-end probes', () => {
  it('a router and a proxy on a routing file are live and ready', async () => {
    for (const p of [...fleet.routers, ...fleet.proxies]) {
      const base = p.metrics.replace(/\/metrics$/, '');
      await until(base, '/readyz', (a) => a.status === 200, 'ready');
      expect(await ask(base, '/livez')).toEqual({ status: 200, body: 'ok\n' });
    }
  }, 90_000);

  it('a router and a proxy whose control plane never answers are live but not ready', async () => {
    const portBase = await freePortBase(4);
    const [deadControlPlane, routerGrpc, proxyGrpc, metricsPort] = [0, 1, 2, 3].map((i) => portBase + i);
    const processes = [
      { main: CELL_ROUTER_MAIN, grpc: routerGrpc, metrics: metricsPort },
      { main: SESSION_PROXY_MAIN, grpc: proxyGrpc, metrics: metricsPort + 100 },
    ];
    for (const p of processes) {
      const argv = [p.main, '--listen', `127.0.0.1:${p.grpc}`, '--metrics-listen', `127.0.0.1:${p.metrics}`];
      argv.push('--control-plane', `http://127.0.0.1:${deadControlPlane}`);
      spawned.push(spawn(process.execPath, argv, { stdio: 'ignore', env: { ...process.env, FENCER_LOG_LEVEL: 'error' } }));
    }
    for (const p of processes) {
      const base = `http://127.0.0.1:${p.metrics}`;
      const first = await until(base, '/readyz', (a) => a.status !== 0, 'an answer');
      expect(first.status).toBe(503);
      expect(first.body).toMatch(/^no routing table yet/);
      expect(await ask(base, '/livez')).toEqual({ status: 200, body: 'ok\n' });
      for (let i = 0; i < 3; i++) expect((await ask(base, '/readyz')).status).toBe(503);
    }
    releasePorts([portBase, portBase + 1, portBase + 2, portBase + 3]);
  }, 90_000);
});

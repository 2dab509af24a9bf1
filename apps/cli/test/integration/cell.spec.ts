/**
 * Goal: `fencer lock` against a real five-replica cell: it exports the lock's token to its command; killing the leader
 * during the command does not disturb it; the session's expiry (every
 * replica SIGSTOPped past TTL and grace) stops it with exit 80; --wait 0 on
 * a held lock returns 75.
 * Method: tools/fleet starts apps/cell-node five times on free loopback
 * ports; runCli runs in-process; the command is the probe process, which
 * reports its environment and signals over loopback TCP.
 */
import { EventEmitter } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencerClient } from '@fencer/client';
import { EXIT, runCli, type CliIo } from '../../src/index.js';
import { Probe } from '../probe.js';
import { startCell, type Cell } from './cell.js';

let cell: Cell;
let probe: Probe;
let other: FencerClient;

beforeAll(async () => {
  cell = await startCell();
  probe = await Probe.start();
  other = new FencerClient({ endpoints: cell.endpoints, clientId: 'other-holder' });
}, 240_000);

afterAll(async () => {
  await other?.close();
  await probe?.stop();
  await cell?.stop();
});

/** Heartbeat answers of the CLI's client, for waiting on renewals instead of on time. */
const answered = new EventEmitter();

function lock(args: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const io: CliIo = {
    stdout: () => {},
    stderr: (t) => (err += t),
    env: { ...process.env, FENCER_ENDPOINTS: cell.endpoints.join(','), ...probe.env() },
    cwd: process.cwd(),
    childStdio: 'ignore',
    clientOptions: { keepAliveObserver: { onHeartbeatAnswered: () => answered.emit('answered', performance.now()) } },
  };
  return runCli(['lock', ...args, '--', ...probe.command()], io).then((code) => ({ code, err }));
}

describe('fencer lock against a real cell', () => {
  it('exports the token; killing the leader during the command does not disturb it', async () => {
    const running = lock(['/ls/itcli/job', '--ttl', '6s']);
    const hello = await probe.next('env');
    const token = Number(hello.env!['FENCER_LOCK_TOKEN']);
    const got = await other.getLock('/ls/itcli/job');
    expect(got.lock.holders.map((h) => h.token)).toEqual([token]);
    expect(hello.env!['FENCER_LOCK_NAME']).toBe('/ls/itcli/job');
    const leader = (await cell.leader()).leaderId;
    const killedAt = performance.now();
    await cell.kill(leader);
    await cell.leaderAmong(cell.replicas.map((r) => r.id).filter((id) => id !== leader));
    // Heartbeats keep being answered for more than a whole TTL after the kill…
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no heartbeat answered a TTL after the kill')), 20_000);
      const on = (at: number): void => {
        if (at < killedAt + 6_000) return;
        clearTimeout(timer);
        answered.off('answered', on);
        resolve();
      };
      answered.on('answered', on);
    });
    // …and the lock is still held with the same token.
    const again = await other.getLock('/ls/itcli/job');
    expect(again.lock.holders.map((h) => h.token)).toEqual([token]);
    expect(probe.messages.some((m) => m.kind === 'signal')).toBe(false);
    probe.exitAll(0);
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.err).not.toMatch(/jeopardy|lost/);
  }, 120_000);

  it('--wait 0 on a held lock returns 75', async () => {
    const h = await other.acquire('/ls/itcli/busy');
    const r = await lock(['/ls/itcli/busy', '--wait', '0']);
    expect(r.code).toBe(EXIT.LOCK_BUSY);
    await h.release();
  }, 60_000);

  it('expiry stops the command: every replica stopped past TTL and grace → SIGTERM, exit 80', async () => {
    const live = cell.replicas.map((r) => r.id);
    const running = lock(['/ls/itcli/exp', '--ttl', '3s', '--grace', '2s']);
    await probe.next('env');
    for (const id of live) cell.signal(id, 'SIGSTOP');
    try {
      expect((await probe.next('signal', 30_000)).signal).toBe('SIGTERM');
      const r = await running;
      expect(r.code).toBe(EXIT.LOCK_LOST);
      expect(r.err).toMatch(/jeopardy/);
      expect(r.err).toMatch(/is lost \(the session expired\)/);
    } finally {
      for (const id of live) cell.signal(id, 'SIGCONT');
    }
  }, 90_000);
});

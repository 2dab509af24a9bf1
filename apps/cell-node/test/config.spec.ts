/**
 * Goal: a node refuses a configuration that cannot work, with a message that
 * names the flag, and applies the documented defaults.
 * Method: parse argument lists.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig, parsePeers } from '../src/config.js';
import { WAL_SYNC_ON_LOOP_IDLE_MS, WAL_SYNC_ON_LOOP_SLOW_MS, walSyncOnLoop } from '../src/wal-sync-policy.js';

const base = ['--id', 'r1', '--peers', 'r1=127.0.0.1:7001,r2=127.0.0.1:7002,r3=127.0.0.1:7003'];

describe('cell-node configuration', () => {
  it('applies the defaults of the contract and the architecture', () => {
    const c = parseConfig(base, {});
    expect(c.ttlMinMs).toBe(2000);
    expect(c.ttlMaxMs).toBe(3_600_000);
    expect(c.ttlDefaultMs).toBe(12_000);
    expect(c.tickMs * c.electionTicks).toBe(1000);
    expect(c.tickMs * c.heartbeatTicks).toBe(100);
    expect(c.tickMs * c.idleHeartbeatTicks).toBe(300);
    expect(c.heartbeatRoundSpacingMs).toBe(5);
    expect(c.peers.get('r2' as never)).toBe('127.0.0.1:7002');
  });

  it('takes values from FENCER_* environment variables when flags are absent', () => {
    const c = parseConfig(base, { FENCER_TTL_DEFAULT_MS: '15000', FENCER_CELL_ID: 'cell-9' });
    expect(c.ttlDefaultMs).toBe(15000);
    expect(c.cellId).toBe('cell-9');
  });

  it.each([
    [['--tick-ms', 'abc'], /tick-ms must be a non-negative integer/],
    [['--ttl-min-ms', '500'], /ttl-min-ms .* must be at least twice the election timeout/],
    [['--election-ticks', '1', '--heartbeat-ticks', '1'], /election-ticks must exceed/],
    [['--heartbeat-ticks', '4'], /idle-heartbeat-ticks \(3\) must be from --heartbeat-ticks \(4\)/],
    [['--idle-heartbeat-ticks', '10'], /idle-heartbeat-ticks \(10\) must be from .* to below --election-ticks \(10\)/],
    [['--ttl-default-ms', '99999999'], /ttl-min-ms <= ttl-default-ms <= ttl-max-ms/],
    [['--heartbeat-round-spacing-ms', '300'], /heartbeat-round-spacing-ms \(300\) must be at most a tenth of --ttl-min-ms \(2000\)/],
  ])('refuses %j', (extra, message) => {
    expect(() => parseConfig([...base, ...(extra as string[])], {})).toThrow(message as RegExp);
  });

  it('requires this node among its peers unless it joins', () => {
    expect(() => parseConfig(['--id', 'r9', '--peers', 'r1=127.0.0.1:7001'], {})).toThrow(/must list this node/);
    expect(parseConfig(['--id', 'r9', '--join', '--peers', 'r1=127.0.0.1:7001'], {}).join).toBe(true);
  });

  it('rejects a malformed peer list', () => {
    expect(() => parsePeers('r1=localhost')).toThrow(/id=host:port/);
  });
});

describe('peer dial overrides', () => {
  it('routes the peer transport through other addresses while peers stay advertised', () => {
    const c = parseConfig([...base, '--peer-dial', 'r2=127.0.0.1:9002'], {});
    expect(c.peerDial.get('r2' as never)).toBe('127.0.0.1:9002');
    expect(c.peers.get('r2' as never)).toBe('127.0.0.1:7002');
  });
  it('sends over TCP by default, listening for peers on the gRPC port + 300 unless told otherwise', () => {
    const c = parseConfig([...base, '--listen', '127.0.0.1:7001'], {});
    expect(c.peerTransport).toBe('tcp');
    expect(c.peerListen).toBe('127.0.0.1:7301');
    const d = parseConfig([...base, '--listen', '127.0.0.1:7001', '--peer-port-offset', '1000', '--peer-transport', 'grpc'], {});
    expect(d.peerListen).toBe('127.0.0.1:8001');
    expect(d.peerTransport).toBe('grpc');
    expect(parseConfig([...base, '--peer-listen', '0.0.0.0:9000'], {}).peerListen).toBe('0.0.0.0:9000');
    expect(c.broadcastCommit).toBe(false);
    expect(parseConfig([...base, '--broadcast-commit'], {}).broadcastCommit).toBe(true);
  });

  it.each([
    [['--peer-transport', 'udp'], /--peer-transport "udp" must be tcp or grpc/],
    [['--listen', '127.0.0.1:65400'], /--listen \/ --peer-port-offset: .* give --peer-listen and --peer-dial/],
  ])('refuses peer transport settings %j', (extra, message) => {
    expect(() => parseConfig([...base, ...extra], {})).toThrow(message);
  });
});

describe('where WAL syncs run', () => {
  it('syncs on the event loop when idle by default, and never when told', () => {
    expect(parseConfig(base, {}).walSyncOnLoop).toBe('when-idle');
    expect(parseConfig([...base, '--wal-sync-on-loop', 'never'], {}).walSyncOnLoop).toBe('never');
    expect(parseConfig(base, { FENCER_WAL_SYNC_ON_LOOP: 'never' }).walSyncOnLoop).toBe('never');
  });

  it('rejects an unknown mode, naming the flag and the choices', () => {
    expect(() => parseConfig([...base, '--wal-sync-on-loop', 'sometimes'], {})).toThrow(
      /--wal-sync-on-loop "sometimes" must be when-idle or never or always/,
    );
  });

  it('when-idle: a follower idle 0.5 ms syncs on its loop; a leader too, after polling for I/O, while it serves at most one call; never after a slow sync', () => {
    const view = { leader: false, calls: 0 };
    const place = walSyncOnLoop('when-idle', { isLeader: () => view.leader, callsInFlight: () => view.calls })!;
    expect(WAL_SYNC_ON_LOOP_IDLE_MS).toBe(0.5);
    expect(place(5, 0.1)).toBe('loop');
    expect(place(0.2, 0.1)).toBe('pool');
    expect(place(5, WAL_SYNC_ON_LOOP_SLOW_MS + 1)).toBe('pool'); // a slow disk: keep the loop free
    view.calls = 7; // a follower's sync is not held back by calls it forwards
    expect(place(5, 0.1)).toBe('loop');
    view.leader = true;
    expect(place(5, 0.1)).toBe('pool');
    view.calls = 1;
    expect(place(5, 0.1)).toBe('loop-after-io');
    expect(place(0.2, 0.1)).toBe('pool');
    expect(place(5, WAL_SYNC_ON_LOOP_SLOW_MS + 1)).toBe('pool');
    expect(walSyncOnLoop('never', { isLeader: () => false, callsInFlight: () => 0 })).toBeUndefined();
  });

  it('always: on the loop busy or idle, after a slow sync too; a leader after polling for I/O', () => {
    const view = { leader: false };
    const place = walSyncOnLoop('always', { isLeader: () => view.leader, callsInFlight: () => 9 })!;
    expect(place(0.1, WAL_SYNC_ON_LOOP_SLOW_MS + 1)).toBe('loop');
    view.leader = true;
    expect(place(0.1, WAL_SYNC_ON_LOOP_SLOW_MS + 1)).toBe('loop-after-io');
  });
});

/**
 * Configuration of one cell node: flags, with environment variables
 * (FENCER_<FLAG>) as the fallback. Every duration is named with its unit.
 */
import { Command, InvalidArgumentError } from 'commander';
import { NodeId } from '@fencer/base';
import { raftTuningDefault } from '@fencer/raft';
import { limits as replicaLimits } from '@fencer/replica';
import { shiftPort } from './address.js';
import { WAL_SYNC_ON_LOOP_MODES, type WalSyncOnLoop } from './wal-sync-policy.js';

export interface CellNodeConfig {
  readonly id: NodeId;
  readonly cellId: string;
  /** gRPC address for the lock service and internal calls (peer traffic has its own listener). */
  readonly listen: string;
  readonly adminListen: string;
  /** host:port for Prometheus metrics over HTTP (/metrics). */
  readonly metricsListen: string;
  readonly dataDir: string;
  /** Initial members (bootstrap) and their gRPC addresses, this node included unless it joins. */
  readonly peers: ReadonlyMap<NodeId, string>;
  /**
   * Where the peer transport dials each member, when not its advertised
   * address (a test harness routes every directed peer link through its own
   * fault-injecting proxy this way). Clients and leader hints keep `peers`.
   */
  readonly peerDial: ReadonlyMap<NodeId, string>;
  /** How this node sends Raft messages: plain TCP frames (default) or gRPC streams. It receives both. */
  readonly peerTransport: 'tcp' | 'grpc';
  /** Where the peer transport (TCP frames or the gRPC stream) listens. */
  readonly peerListen: string;
  /** A member's TCP peer port is its gRPC port plus this, unless --peer-dial names its address. */
  readonly peerPortOffset: number;
  /** Send each commit advance to followers at once (etcd's way) instead of with the next append or heartbeat. */
  readonly broadcastCommit: boolean;
  /**
   * When this node runs a WAL fdatasync on its own thread instead of libuv's
   * thread pool: 'when-idle' (default) when nothing else waits on its event
   * loop, 'never' always the pool (see wal-sync-policy.ts).
   */
  readonly walSyncOnLoop: WalSyncOnLoop;
  /** Least time between the starts of two leadership confirmations for heartbeats (HeartbeatConfirmer). */
  readonly heartbeatRoundSpacingMs: number;
  /** Start without bootstrapping: wait to be added to an existing cell. */
  readonly join: boolean;
  /** A control plane decides which namespaces this cell owns (admin ClaimNamespace): no auto-claim on first use. */
  readonly managed?: boolean;
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly heartbeatTicks: number;
  readonly ttlMinMs: number;
  readonly ttlMaxMs: number;
  readonly ttlDefaultMs: number;
  readonly snapshotEveryEntries: number;
  readonly watchHistoryMax: number;
  readonly watcherBufferMax: number;
  readonly watchersMax: number;
  readonly watchProgressMs: number;
  readonly peerSendQueueMax: number;
  /** Most held-open Acquire calls on this node. */
  readonly waitingCallsMax: number;
  /** gRPC messages larger than this are refused (RESOURCE_EXHAUSTED). */
  readonly grpcMessageBytesMax: number;
  /** On SIGTERM, how long a leader waits for leadership to move before it stops anyway. */
  readonly shutdownTransferMs: number;
}

const int =
  (what: string) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${what} must be a non-negative integer, got "${value}"`);
    return n;
  };

function shiftPortOrFail(address: string, offset: number): string {
  try {
    return shiftPort(address, offset);
  } catch (err) {
    throw new InvalidArgumentError(`--listen / --peer-port-offset: ${(err as Error).message}`);
  }
}

export function parsePeers(spec: string): Map<NodeId, string> {
  const peers = new Map<NodeId, string>();
  for (const part of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([A-Za-z0-9._-]+)=([^\s=]+:\d+)$/.exec(part);
    if (!m) throw new InvalidArgumentError(`peer "${part}" is not of the form id=host:port`);
    peers.set(NodeId(m[1]!), m[2]!);
  }
  return peers;
}

export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): CellNodeConfig {
  const e = (flag: string): string | undefined => env[`FENCER_${flag.toUpperCase().replace(/-/g, '_')}`];
  const program = new Command('fencer-cell-node')
    .description('One replica of a Fencer cell.')
    .exitOverride()
    .requiredOption('--id <id>', "this replica's node id", e('id'))
    .option('--cell-id <id>', 'the cell this replica belongs to', e('cell-id') ?? 'cell-1')
    .option(
      '--listen <host:port>',
      'gRPC address for clients (lock service, internal heartbeat batches; never peer traffic)',
      e('listen') ?? '127.0.0.1:7001',
    )
    .option('--admin-listen <host:port>', 'admin gRPC address', e('admin-listen') ?? '127.0.0.1:7101')
    .option('--metrics-listen <host:port>', 'Prometheus metrics address', e('metrics-listen') ?? '127.0.0.1:7201')
    .option('--data-dir <dir>', 'where the WAL and snapshots live', e('data-dir') ?? './.fencer/node')
    .option('--peers <list>', 'initial members: id=host:port,...', e('peers') ?? '')
    .option('--peer-dial <list>', 'dial overrides for the peer transport: id=host:port,...', e('peer-dial') ?? '')
    .option(
      '--peer-transport <kind>',
      'how the cell carries Raft messages on the peer listener: tcp frames or a grpc stream (the same on every member)',
      e('peer-transport') ?? 'tcp',
    )
    .option(
      '--peer-listen <host:port>',
      'TCP peer transport address (default: the --listen host, its port + --peer-port-offset)',
      e('peer-listen'),
    )
    .option(
      '--peer-port-offset <n>',
      "a member's TCP peer port is its gRPC port plus this",
      int('peer-port-offset'),
      Number(e('peer-port-offset') ?? 300),
    )
    .option(
      '--broadcast-commit',
      'send every commit advance to followers at once (default: with the next append or heartbeat)',
      (e('broadcast-commit') ?? (raftTuningDefault.broadcastCommit ? '1' : '0')) === '1',
    )
    .option(
      '--wal-sync-on-loop <when>',
      `when a WAL fdatasync runs on the event loop instead of the thread pool: ${WAL_SYNC_ON_LOOP_MODES.join(' or ')}`,
      e('wal-sync-on-loop') ?? 'when-idle',
    )
    .option(
      '--heartbeat-round-spacing-ms <ms>',
      'least time between the starts of two leadership confirmations that answer heartbeats',
      int('heartbeat-round-spacing-ms'),
      Number(e('heartbeat-round-spacing-ms') ?? 5),
    )
    .option('--join', 'join an existing cell instead of bootstrapping', e('join') === '1')
    .option('--managed', 'a control plane assigns namespaces (admin ClaimNamespace); none is claimed on first use', e('managed') === '1')
    .option('--tick-ms <ms>', 'Raft tick', int('tick-ms'), Number(e('tick-ms') ?? 100))
    .option(
      '--election-ticks <n>',
      'election timeout in ticks',
      int('election-ticks'),
      Number(e('election-ticks') ?? raftTuningDefault.electionTicks),
    )
    .option(
      '--heartbeat-ticks <n>',
      'heartbeat interval in ticks',
      int('heartbeat-ticks'),
      Number(e('heartbeat-ticks') ?? raftTuningDefault.heartbeatTicks),
    )
    .option('--ttl-min-ms <ms>', 'smallest session TTL', int('ttl-min-ms'), Number(e('ttl-min-ms') ?? 2_000))
    .option('--ttl-max-ms <ms>', 'largest session TTL', int('ttl-max-ms'), Number(e('ttl-max-ms') ?? 3_600_000))
    .option('--ttl-default-ms <ms>', 'TTL when a client asks for 0', int('ttl-default-ms'), Number(e('ttl-default-ms') ?? 12_000))
    .option(
      '--snapshot-every-entries <n>',
      'snapshot and compact every n applied entries',
      int('snapshot-every-entries'),
      Number(e('snapshot-every-entries') ?? replicaLimits.snapshotEveryEntriesDefault),
    )
    .option(
      '--watch-history-max <n>',
      'events kept for Watch resumption',
      int('watch-history-max'),
      Number(e('watch-history-max') ?? 100_000),
    )
    .option(
      '--watcher-buffer-max <n>',
      'events buffered for one watcher before it is ended as too slow',
      int('watcher-buffer-max'),
      Number(e('watcher-buffer-max') ?? 10_000),
    )
    .option('--watchers-max <n>', 'most watchers on this node', int('watchers-max'), Number(e('watchers-max') ?? 10_000))
    .option(
      '--watch-progress-ms <ms>',
      'PROGRESS interval for idle watchers',
      int('watch-progress-ms'),
      Number(e('watch-progress-ms') ?? 5_000),
    )
    .option(
      '--peer-send-queue-max <n>',
      'messages queued per peer link',
      int('peer-send-queue-max'),
      Number(e('peer-send-queue-max') ?? 4_096),
    )
    .option(
      '--waiting-calls-max <n>',
      'held-open Acquire calls on this node',
      int('waiting-calls-max'),
      Number(e('waiting-calls-max') ?? 100_000),
    )
    .option(
      '--grpc-message-bytes-max <n>',
      'largest gRPC message accepted',
      int('grpc-message-bytes-max'),
      Number(e('grpc-message-bytes-max') ?? 4 * 1024 * 1024),
    )
    .option(
      '--shutdown-transfer-ms <ms>',
      'leadership transfer wait on SIGTERM',
      int('shutdown-transfer-ms'),
      Number(e('shutdown-transfer-ms') ?? 3_000),
    );
  program.parse(argv, { from: 'user' });
  const o = program.opts();
  const config: CellNodeConfig = {
    id: NodeId(o.id),
    cellId: o.cellId,
    listen: o.listen,
    adminListen: o.adminListen,
    metricsListen: o.metricsListen,
    dataDir: o.dataDir,
    peers: parsePeers(o.peers),
    peerDial: parsePeers(o.peerDial),
    peerTransport: o.peerTransport,
    peerListen: o.peerListen ?? shiftPortOrFail(o.listen, o.peerPortOffset),
    peerPortOffset: o.peerPortOffset,
    broadcastCommit: Boolean(o.broadcastCommit),
    walSyncOnLoop: o.walSyncOnLoop,
    heartbeatRoundSpacingMs: o.heartbeatRoundSpacingMs,
    join: Boolean(o.join),
    managed: Boolean(o.managed),
    tickMs: o.tickMs,
    electionTicks: o.electionTicks,
    heartbeatTicks: o.heartbeatTicks,
    ttlMinMs: o.ttlMinMs,
    ttlMaxMs: o.ttlMaxMs,
    ttlDefaultMs: o.ttlDefaultMs,
    snapshotEveryEntries: o.snapshotEveryEntries,
    watchHistoryMax: o.watchHistoryMax,
    watcherBufferMax: o.watcherBufferMax,
    watchersMax: o.watchersMax,
    watchProgressMs: o.watchProgressMs,
    peerSendQueueMax: o.peerSendQueueMax,
    waitingCallsMax: o.waitingCallsMax,
    grpcMessageBytesMax: o.grpcMessageBytesMax,
    shutdownTransferMs: o.shutdownTransferMs,
  };
  validateConfig(config);
  return config;
}

export function validateConfig(c: CellNodeConfig): void {
  const fail = (msg: string): never => {
    throw new InvalidArgumentError(msg);
  };
  if (!/^[A-Za-z0-9._-]+$/.test(c.id)) fail(`--id "${c.id}" may use only [A-Za-z0-9._-]`);
  if (!c.join && !c.peers.has(c.id)) fail(`--peers must list this node (${c.id}) unless --join is given`);
  if (c.peerTransport !== 'tcp' && c.peerTransport !== 'grpc') fail(`--peer-transport "${c.peerTransport}" must be tcp or grpc`);
  if (!(WAL_SYNC_ON_LOOP_MODES as readonly string[]).includes(c.walSyncOnLoop))
    fail(`--wal-sync-on-loop "${c.walSyncOnLoop}" must be ${WAL_SYNC_ON_LOOP_MODES.join(' or ')}`);
  if (c.tickMs < 1) fail('--tick-ms must be at least 1');
  if (c.electionTicks <= c.heartbeatTicks) fail('--election-ticks must exceed --heartbeat-ticks');
  if (!(c.ttlMinMs <= c.ttlDefaultMs && c.ttlDefaultMs <= c.ttlMaxMs))
    fail('TTL bounds must satisfy ttl-min-ms <= ttl-default-ms <= ttl-max-ms');
  if (c.heartbeatRoundSpacingMs * 10 > c.ttlMinMs)
    fail(`--heartbeat-round-spacing-ms (${c.heartbeatRoundSpacingMs}) must be at most a tenth of --ttl-min-ms (${c.ttlMinMs})`);
  // A session must survive a leader election: its TTL must exceed the worst election timeout.
  if (c.ttlMinMs < 2 * c.electionTicks * c.tickMs)
    fail(`--ttl-min-ms (${c.ttlMinMs}) must be at least twice the election timeout (${2 * c.electionTicks * c.tickMs} ms)`);
  if (c.snapshotEveryEntries < 1) fail('--snapshot-every-entries must be at least 1');
}

/**
 * Configuration of one cell node: flags, with environment variables
 * (FENCER_<FLAG>) as the fallback. Every duration is named with its unit.
 */
import { Command, InvalidArgumentError } from 'commander';
import { NodeId } from '@fencer/base';
import { raftTuningDefault } from '@fencer/raft';
import { limits as replicaLimits } from '@fencer/replica';
import { type TlsPaths, tlsOption } from '@fencer/service';
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
  /**
   * Tenant tokens are required on every lock-service call and checked against
   * the namespace's replicated hashes (--auth; docs/decisions/0016-tenant-credentials-and-mtls.md).
   */
  readonly auth?: boolean;
  /** The admin token's file (--admin-token-file): that token reaches every namespace of the lock service. */
  readonly adminTokenFile?: string;
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly heartbeatTicks: number;
  /** Heartbeat interval in ticks once the cell has written and read nothing for an election timeout (RaftConfig.idleHeartbeatTicks). */
  readonly idleHeartbeatTicks: number;
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
  /**
   * Mutual TLS on every port but metrics (--tls-cert, --tls-key, --tls-ca):
   * peers must name a replica of this cell, the admin port a control plane
   * or an operator, the client port any holder the CA signed. Absent: plaintext.
   */
  readonly tls?: TlsPaths;
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

/** Reads flag `--name`'s environment fallback, FENCER_NAME. */
type EnvOf = (flag: string) => string | undefined;

/**
 * An idle cell's leader heartbeats every 300 ms instead of every 100 ms
 * (docs/decisions/0024-idle-fleets-and-follower-reads.md): at eight cells of
 * five replicas the 100 ms heartbeats of idle cells were half of each
 * replica's idle CPU. A working cell keeps --heartbeat-ticks; followers
 * still hear from the leader three times in an election timeout.
 */
const IDLE_HEARTBEAT_TICKS_DEFAULT = 3;

/** A non-negative integer option: flag, what it sets, and its default when neither flag nor environment gives one. */
type IntOption = readonly [flag: string, description: string, defaultValue: number];

/** The integer options, in the order `--help` lists them. */
const INT_OPTIONS: readonly IntOption[] = [
  ['peer-port-offset', "a member's TCP peer port is its gRPC port plus this", 300],
  ['heartbeat-round-spacing-ms', 'least time between the starts of two leadership confirmations that answer heartbeats', 5],
  ['tick-ms', 'Raft tick', 100],
  ['election-ticks', 'election timeout in ticks', raftTuningDefault.electionTicks],
  ['heartbeat-ticks', 'heartbeat interval in ticks', raftTuningDefault.heartbeatTicks],
  [
    'idle-heartbeat-ticks',
    'heartbeat interval in ticks once the cell wrote and read nothing for an election timeout',
    IDLE_HEARTBEAT_TICKS_DEFAULT,
  ],
  ['ttl-min-ms', 'smallest session TTL', 2_000],
  ['ttl-max-ms', 'largest session TTL', 3_600_000],
  ['ttl-default-ms', 'TTL when a client asks for 0', 12_000],
  ['snapshot-every-entries', 'snapshot and compact every n applied entries', replicaLimits.snapshotEveryEntriesDefault],
  ['watch-history-max', 'events kept for Watch resumption', 100_000],
  ['watcher-buffer-max', 'events buffered for one watcher before it is ended as too slow', 10_000],
  ['watchers-max', 'most watchers on this node', 10_000],
  ['watch-progress-ms', 'PROGRESS interval for idle watchers', 5_000],
  ['peer-send-queue-max', 'messages queued per peer link', 4_096],
  ['waiting-calls-max', 'held-open Acquire calls on this node', 100_000],
  ['grpc-message-bytes-max', 'largest gRPC message accepted', 4 * 1024 * 1024],
  ['shutdown-transfer-ms', 'leadership transfer wait on SIGTERM', 3_000],
];

/** Where this replica is and what it listens on. */
function addPlacementOptions(program: Command, e: EnvOf): Command {
  return program
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
    .option('--join', 'join an existing cell instead of bootstrapping', e('join') === '1')
    .option('--managed', 'a control plane assigns namespaces (admin ClaimNamespace); none is claimed on first use', e('managed') === '1')
    .option(
      '--auth',
      'require a tenant token (authorization: Bearer) on every lock-service call, checked against its namespace',
      e('auth') === '1',
    )
    .option('--admin-token-file <file>', "the control plane's admin token (it reaches every namespace); with --auth", e('admin-token-file'))
    .option(
      '--tls-cert <file>',
      "this replica's certificate (PEM; its URI SAN names fencer://cell/<cell>/<id>); turns mutual TLS on",
      e('tls-cert'),
    )
    .option('--tls-key <file>', 'the key of --tls-cert (PEM)', e('tls-key'))
    .option('--tls-ca <file>', 'the CA that signs every peer, router, proxy, control plane and operator (PEM)', e('tls-ca'));
}

/** How this replica reaches its peers, and how it replicates. */
function addPeerOptions(program: Command, e: EnvOf): Command {
  return program
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
      '--broadcast-commit',
      'send every commit advance to followers at once (default: with the next append or heartbeat)',
      (e('broadcast-commit') ?? (raftTuningDefault.broadcastCommit ? '1' : '0')) === '1',
    )
    .option(
      '--wal-sync-on-loop <when>',
      `when a WAL fdatasync runs on the event loop instead of the thread pool: ${WAL_SYNC_ON_LOOP_MODES.join(' or ')}`,
      e('wal-sync-on-loop') ?? 'when-idle',
    );
}

function addIntOptions(program: Command, e: EnvOf): Command {
  for (const [flag, description, defaultValue] of INT_OPTIONS) {
    program.option(`--${flag} <n>`, description, int(flag), Number(e(flag) ?? defaultValue));
  }
  return program;
}

/** The parsed options as a configuration (before validateConfig). */
function configOf(o: Record<string, string | number | boolean | undefined>): CellNodeConfig {
  const n = (key: string): number => o[key] as number;
  return {
    id: NodeId(o.id as string),
    cellId: o.cellId as string,
    listen: o.listen as string,
    adminListen: o.adminListen as string,
    metricsListen: o.metricsListen as string,
    dataDir: o.dataDir as string,
    peers: parsePeers(o.peers as string),
    peerDial: parsePeers(o.peerDial as string),
    peerTransport: o.peerTransport as CellNodeConfig['peerTransport'],
    peerListen: (o.peerListen as string | undefined) ?? shiftPortOrFail(o.listen as string, n('peerPortOffset')),
    peerPortOffset: n('peerPortOffset'),
    broadcastCommit: Boolean(o.broadcastCommit),
    walSyncOnLoop: o.walSyncOnLoop as WalSyncOnLoop,
    heartbeatRoundSpacingMs: n('heartbeatRoundSpacingMs'),
    join: Boolean(o.join),
    managed: Boolean(o.managed),
    auth: Boolean(o.auth),
    ...(typeof o.adminTokenFile === 'string' ? { adminTokenFile: o.adminTokenFile } : {}),
    tickMs: n('tickMs'),
    electionTicks: n('electionTicks'),
    heartbeatTicks: n('heartbeatTicks'),
    idleHeartbeatTicks: n('idleHeartbeatTicks'),
    ttlMinMs: n('ttlMinMs'),
    ttlMaxMs: n('ttlMaxMs'),
    ttlDefaultMs: n('ttlDefaultMs'),
    snapshotEveryEntries: n('snapshotEveryEntries'),
    watchHistoryMax: n('watchHistoryMax'),
    watcherBufferMax: n('watcherBufferMax'),
    watchersMax: n('watchersMax'),
    watchProgressMs: n('watchProgressMs'),
    peerSendQueueMax: n('peerSendQueueMax'),
    waitingCallsMax: n('waitingCallsMax'),
    grpcMessageBytesMax: n('grpcMessageBytesMax'),
    shutdownTransferMs: n('shutdownTransferMs'),
    ...tlsOption(o as { tlsCert?: string; tlsKey?: string; tlsCa?: string }),
  };
}

export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): CellNodeConfig {
  const e: EnvOf = (flag) => env[`FENCER_${flag.toUpperCase().replace(/-/g, '_')}`];
  const program = new Command('fencer-cell-node').description('One replica of a Fencer cell.').exitOverride();
  addIntOptions(addPeerOptions(addPlacementOptions(program, e), e), e);
  program.parse(argv, { from: 'user' });
  const config = configOf(program.opts());
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
  if (c.idleHeartbeatTicks < c.heartbeatTicks || c.idleHeartbeatTicks >= c.electionTicks)
    fail(
      `--idle-heartbeat-ticks (${c.idleHeartbeatTicks}) must be from --heartbeat-ticks (${c.heartbeatTicks}) to below --election-ticks (${c.electionTicks})`,
    );
  if (!(c.ttlMinMs <= c.ttlDefaultMs && c.ttlDefaultMs <= c.ttlMaxMs))
    fail('TTL bounds must satisfy ttl-min-ms <= ttl-default-ms <= ttl-max-ms');
  if (c.heartbeatRoundSpacingMs * 10 > c.ttlMinMs)
    fail(`--heartbeat-round-spacing-ms (${c.heartbeatRoundSpacingMs}) must be at most a tenth of --ttl-min-ms (${c.ttlMinMs})`);
  // A session must survive a leader election: its TTL must exceed the worst election timeout.
  if (c.ttlMinMs < 2 * c.electionTicks * c.tickMs)
    fail(`--ttl-min-ms (${c.ttlMinMs}) must be at least twice the election timeout (${2 * c.electionTicks * c.tickMs} ms)`);
  if (c.snapshotEveryEntries < 1) fail('--snapshot-every-entries must be at least 1');
}

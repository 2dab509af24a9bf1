/**
 * Configuration of one control-plane instance: flags, with environment
 * variables (FENCER_CP_<FLAG>) as the fallback.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { NodeId } from '@fencer/base';
import { openObjectStore, type S3Connection } from '@fencer/object-store';
import type { CellPlan } from './cells.js';
import { snapshotScheduleDefault, type SnapshotSchedule } from './workers/snapshot-task.js';
import { type TlsPaths, tlsOption } from '@fencer/service';

export interface ControlPlaneConfig {
  readonly id: NodeId;
  /** Meta-group members and their Raft peer addresses (TCP frames), this instance included. */
  readonly peers: ReadonlyMap<NodeId, string>;
  /** Meta-group members' HTTP base URLs (a follower forwards requests to the leader's). */
  readonly urls: ReadonlyMap<NodeId, string>;
  readonly dataDir: string;
  /** host:port of the HTTP API. */
  readonly listen: string;
  /** host:port where this instance's Raft peer transport listens. */
  readonly peerListen: string;
  readonly metricsListen: string;
  /** The cells this control plane manages (a fleet.json has the shape: { cells: [{ id, replicas: [{ id, grpc, admin }] }] }). */
  readonly cells: readonly CellPlan[];
  /** Auth on: the admin token file (created mode 0600 at first start). */
  readonly auth: boolean;
  readonly adminTokenFile: string;
  /**
   * Mutual TLS (--tls-cert, --tls-key, --tls-ca): the meta group's peers
   * take control planes only, the cells' admin ports are dialed with this
   * certificate, and the HTTP API is served over HTTPS. Absent: plaintext.
   */
  readonly tls?: TlsPaths;
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly cellPollMs: number;
  /** A follower serves the routing and fleet reads itself after a barrier through the leader (default), instead of forwarding them. */
  readonly followerReads: boolean;
  /** A pause before each cell step of a move (0: none); process tests use it to catch a move in each state. */
  readonly moveStepPauseMs: number;
  readonly snapshotEveryEntries: number;
  /** Where cell snapshots go: s3://bucket/prefix, or file:///folder (default: <data-dir>/snapshots). */
  readonly snapshotStore: string;
  /** How to reach an S3-compatible endpoint, for an s3:// store (credentials: the AWS SDK's standard chain). */
  readonly s3: S3Connection;
  readonly snapshotSchedule: SnapshotSchedule;
}

function parseMap(flag: string, value: string): Map<NodeId, string> {
  const out = new Map<NodeId, string>();
  for (const part of value.split(',').filter((p) => p.trim() !== '')) {
    const at = part.indexOf('=');
    if (at <= 0) throw new InvalidArgumentError(`${flag}: "${part}" is not id=address`);
    out.set(NodeId(part.slice(0, at).trim()), part.slice(at + 1).trim());
  }
  return out;
}

function readCells(file: string | undefined): CellPlan[] {
  if (file === undefined) return [];
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as { cells?: CellPlan[] };
  if (!Array.isArray(parsed.cells)) throw new InvalidArgumentError(`--cells-file ${file} has no "cells" array`);
  return parsed.cells.map((c) => ({
    id: String(c.id),
    replicas: c.replicas.map((r) => ({ id: String(r.id), grpc: String(r.grpc), admin: String(r.admin) })),
  }));
}

export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ControlPlaneConfig {
  const e = (flag: string): string | undefined => env[`FENCER_CP_${flag.toUpperCase().replace(/-/g, '_')}`];
  const int =
    (flag: string) =>
    (v: string): number => {
      if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`--${flag} must be a non-negative integer, got "${v}"`);
      return Number(v);
    };
  const program = new Command('fencer-control-plane')
    .description('One instance of the Fencer control plane (HTTP API on a replicated meta group).')
    .exitOverride()
    .requiredOption('--id <id>', "this instance's id in the meta group", e('id'))
    .option(
      '--peers <list>',
      'meta-group members and their Raft peer addresses: id=host:port,... (default: this instance alone)',
      e('peers') ?? '',
    )
    .option('--urls <list>', "meta-group members' HTTP URLs: id=http://host:port,... (forwarding to the leader)", e('urls') ?? '')
    .option('--data-dir <dir>', 'where the meta group log and snapshots live', e('data-dir') ?? './.fencer/control-plane')
    .option('--listen <host:port>', 'HTTP API address', e('listen') ?? '127.0.0.1:7400')
    .option('--peer-listen <host:port>', "Raft peer transport address (default: this id's --peers entry)", e('peer-listen'))
    .option('--metrics <host:port>', 'Prometheus metrics address', e('metrics') ?? '127.0.0.1:7490')
    .option(
      '--cells-file <file>',
      'JSON with the managed cells, { cells: [{ id, replicas: [{ id, grpc, admin }] }] } (fleet.json has it)',
      e('cells-file'),
    )
    .option('--auth', 'require bearer tokens (admin token generated at first start)', e('auth') === '1')
    .option('--admin-token-file <file>', 'where the admin token is kept (mode 0600)', e('admin-token-file') ?? './.fencer/admin-token');
  addGroupOptions(program, e, int);
  addSnapshotStoreOptions(program, e, int);
  addMoveOptions(program, e, int);
  addTlsOptions(program, e);
  program.parse(argv, { from: 'user' });
  const o = program.opts();
  const id = NodeId(o.id);
  const peers = parseMap('--peers', o.peers);
  const listen: string = o.listen;
  const peerListen: string | undefined = o.peerListen ?? peers.get(id);
  if (peers.size === 0 && peerListen === undefined) {
    // One instance alone still needs a peer address for its own transport; nothing dials it.
    peers.set(id, '127.0.0.1:0');
  }
  if (!peers.has(id)) throw new InvalidArgumentError(`--peers must list this instance (${id})`);
  const urls = parseMap('--urls', o.urls);
  const tls = tlsOption(o as { tlsCert?: string; tlsKey?: string; tlsCa?: string });
  if (!urls.has(id)) urls.set(id, `${tls.tls ? 'https' : 'http'}://${listen}`);
  for (const p of peers.keys()) if (!urls.has(p)) throw new InvalidArgumentError(`--urls has no HTTP URL for member ${p}`);
  if (o.electionTicks < 2) throw new InvalidArgumentError('--election-ticks must be at least 2');
  return {
    id,
    peers,
    urls,
    dataDir: o.dataDir,
    listen,
    peerListen: peerListen ?? peers.get(id)!,
    metricsListen: o.metrics,
    cells: readCells(o.cellsFile),
    auth: Boolean(o.auth),
    adminTokenFile: o.adminTokenFile,
    tickMs: o.tickMs,
    electionTicks: o.electionTicks,
    cellPollMs: o.cellPollMs,
    followerReads: o.followerReads !== false && e('follower-reads') !== 'false',
    moveStepPauseMs: o.moveStepPauseMs,
    snapshotEveryEntries: Math.max(1, o.snapshotEveryEntries),
    ...snapshotStoreConfig(o),
    ...tls,
  };
}

type IntParser = (flag: string) => (v: string) => number;

/** The meta group's Raft timing and snapshots, and how the cells are polled and read. */
function addGroupOptions(program: Command, e: (flag: string) => string | undefined, int: IntParser): void {
  program
    .option('--tick-ms <ms>', 'Raft tick', int('tick-ms'), Number(e('tick-ms') ?? 100))
    .option('--election-ticks <n>', 'election timeout in ticks', int('election-ticks'), Number(e('election-ticks') ?? 10))
    .option(
      '--cell-poll-ms <ms>',
      "how often each cell's leader's admin Status is polled (its followers' every 5th time)",
      int('cell-poll-ms'),
      Number(e('cell-poll-ms') ?? 1000),
    )
    .option('--no-follower-reads', 'forward the routing and fleet reads to the leader instead of serving them here after a barrier')
    .option(
      '--snapshot-every-entries <n>',
      'snapshot and compact every n applied entries',
      int('snapshot-every-entries'),
      Number(e('snapshot-every-entries') ?? 1000),
    );
}

/** Tenant moves: a pause before each cell step, for process tests that stop the meta leader in a given move state. */
function addMoveOptions(program: Command, e: (flag: string) => string | undefined, int: IntParser): void {
  program.option(
    '--move-step-pause-ms <ms>',
    'pause before each cell step of a tenant move (for tests that stop the meta leader in a given move state; 0: none)',
    int('move-step-pause-ms'),
    Number(e('move-step-pause-ms') ?? 0),
  );
}

/** Mutual TLS: this instance's certificate, its key, and the CA of the fleet. */
function addTlsOptions(program: Command, e: (flag: string) => string | undefined): void {
  program
    .option('--tls-cert <file>', "this instance's certificate (PEM; URI SAN fencer://control-plane/<id>); turns TLS on", e('tls-cert'))
    .option('--tls-key <file>', 'the key of --tls-cert (PEM)', e('tls-key'))
    .option('--tls-ca <file>', 'the CA that signs the other instances and the cells (PEM)', e('tls-ca'));
}

/** Cell snapshots in object storage: the store, how to reach S3, the schedule and the retention. */
function addSnapshotStoreOptions(program: Command, e: (flag: string) => string | undefined, int: IntParser): void {
  const d = snapshotScheduleDefault;
  program
    .option(
      '--snapshot-store <url>',
      'where cell snapshots go: s3://bucket/prefix or file:///folder (default: <data-dir>/snapshots)',
      e('snapshot-store'),
    )
    .option('--s3-endpoint <url>', 'endpoint of an S3-compatible service (default: AWS for --s3-region)', e('s3-endpoint'))
    .option('--s3-region <region>', 'S3 region', e('s3-region') ?? 'us-east-1')
    .option('--s3-path-style', 'path-style S3 URLs (endpoint/bucket/key), as most S3-compatible servers need', e('s3-path-style') === '1')
    .option(
      '--snapshot-interval-ms <ms>',
      'snapshot each cell when its newest one is this old; 0: only on request (POST /v1/cells/{cell}/snapshots)',
      int('snapshot-interval-ms'),
      Number(e('snapshot-interval-ms') ?? d.intervalMs),
    )
    .option(
      '--snapshot-keep-last <n>',
      "keep each cell's newest n snapshots",
      int('snapshot-keep-last'),
      Number(e('snapshot-keep-last') ?? d.keepLast),
    )
    .option(
      '--snapshot-keep-days <n>',
      "also keep each cell's newest snapshot of each of the last n days",
      int('snapshot-keep-days'),
      Number(e('snapshot-keep-days') ?? d.keepDailyDays),
    );
}

function snapshotStoreConfig(o: Record<string, unknown>): Pick<ControlPlaneConfig, 'snapshotStore' | 's3' | 'snapshotSchedule'> {
  const keepLast = o['snapshotKeepLast'] as number;
  if (keepLast < 1) throw new InvalidArgumentError('--snapshot-keep-last must be at least 1: retention never deletes the newest snapshot');
  const snapshotStore = (o['snapshotStore'] as string | undefined) ?? pathToFileURL(path.resolve(o['dataDir'] as string, 'snapshots')).href;
  try {
    openObjectStore(snapshotStore).close();
  } catch (err) {
    throw new InvalidArgumentError(`--snapshot-store: ${(err as Error).message}`);
  }
  return {
    snapshotStore,
    s3: {
      region: o['s3Region'] as string,
      forcePathStyle: Boolean(o['s3PathStyle']),
      ...(o['s3Endpoint'] !== undefined ? { endpoint: o['s3Endpoint'] as string } : {}),
    },
    snapshotSchedule: {
      ...snapshotScheduleDefault,
      intervalMs: o['snapshotIntervalMs'] as number,
      keepLast,
      keepDailyDays: o['snapshotKeepDays'] as number,
    },
  };
}

/**
 * One cell node: libs/cell's LockCell configured from the command line,
 * with promise-shaped helpers for the admin service. The replica, the lock
 * layer and the request API all live in libs/cell; the gRPC services
 * (lock-service.ts, admin-service.ts) and build.ts's sockets sit on top.
 */
import { FencerError, type LogIndex, type NodeId } from '@fencer/base';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type CellAuth, type CellEnv, type LeaderForwarder, type LockCellConfig, type LockCellTestHooks, LockCell } from '@fencer/cell';
import type { ConfChange } from '@fencer/raft';
import type { Replica } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import type { Command } from '@fencer/lock-fsm';
import type { CellNodeConfig } from './config.js';
import type { Logger } from '@fencer/service';
import { shiftPort } from './address.js';

export interface NodeEnv extends CellEnv {
  readonly logger: Logger;
}

/** The hash a token is stored as, as the control plane makes it (apps/control-plane/src/auth.ts). */
export function hashToken(token: string): string {
  return `sha256:${createHash('sha256').update(token).digest('hex')}`;
}

/** Tokens whose hash a node keeps at once: far more than the tenants that call one cell; past it the memo starts over. */
const TOKEN_HASHES_MAX = 4_096;

/**
 * hashToken with a memo: a token is checked on every call and on every
 * heartbeat of a KeepAlive stream or a proxy's batch, while a fleet has few
 * distinct tokens, so each is hashed once rather than per heartbeat.
 */
function memoizedHashToken(): (token: string) => string {
  const hashes = new Map<string, string>();
  return (token) => {
    let hash = hashes.get(token);
    if (hash === undefined) {
      if (hashes.size >= TOKEN_HASHES_MAX) hashes.clear();
      hash = hashToken(token);
      hashes.set(token, hash);
    }
    return hash;
  };
}

/**
 * With --auth, how the cell checks tokens: SHA-256 like the control plane
 * (memoized), and the admin token of --admin-token-file (read once at start;
 * it is written before the fleet starts and never rewritten).
 */
export function cellAuth(config: CellNodeConfig): CellAuth | undefined {
  if (config.auth !== true) return undefined;
  const hash = memoizedHashToken();
  if (config.adminTokenFile === undefined) return { hashToken: hash };
  const admin = readFileSync(config.adminTokenFile, 'utf8').trim();
  if (admin === '') throw new Error(`${config.adminTokenFile} is empty: it must hold the control plane's admin token`);
  return { hashToken: hash, adminTokenHash: hash(admin) };
}

/** The cell library's configuration for this node. */
export function lockCellConfig(config: CellNodeConfig): LockCellConfig {
  const auth = cellAuth(config);
  return {
    id: config.id,
    peers: config.peers,
    join: config.join,
    replica: {
      raft: {
        electionTicks: config.electionTicks,
        heartbeatTicks: config.heartbeatTicks,
        idleHeartbeatTicks: config.idleHeartbeatTicks,
        broadcastCommit: config.broadcastCommit,
      },
      snapshotEveryEntries: config.snapshotEveryEntries,
    },
    readsWaitingMax: config.waitingCallsMax,
    defaultPeerAddress: (address) => {
      try {
        return shiftPort(address, config.peerPortOffset);
      } catch (err) {
        throw new FencerError('INVALID_ARGUMENT', `no default peer address for ${address}: ${(err as Error).message}; give peer_address`);
      }
    },
    tickMs: config.tickMs,
    ttlDefaultMs: config.ttlDefaultMs,
    ttlMinMs: config.ttlMinMs,
    ttlMaxMs: config.ttlMaxMs,
    waitingCallsMax: config.waitingCallsMax,
    watchHistoryMax: config.watchHistoryMax,
    watcherBufferMax: config.watcherBufferMax,
    watchersMax: config.watchersMax,
    watchProgressMs: config.watchProgressMs,
    heartbeatRoundSpacingMs: config.heartbeatRoundSpacingMs,
    autoClaim: !config.managed,
    ...(auth !== undefined ? { auth } : {}),
  };
}

export class CellNode {
  readonly cell: LockCell;

  constructor(
    readonly config: CellNodeConfig,
    /** The replica's log store: ReadSnapshot reads its latest snapshot's meta (read-snapshot.ts). */
    readonly store: RaftLogStore,
    readonly env: NodeEnv,
    forwarder: LeaderForwarder,
    testHooks: LockCellTestHooks = {},
  ) {
    this.cell = new LockCell(lockCellConfig(config), store, env, forwarder, testHooks);
  }

  get id(): NodeId {
    return this.config.id;
  }

  get replica(): Replica {
    return this.cell.core.replica;
  }

  get isLeader(): boolean {
    return this.cell.isLeader;
  }

  /** Node id → client address of every member this node knows. */
  get addresses(): ReadonlyMap<NodeId, string> {
    return this.cell.core.members.addresses;
  }

  leaderAddress(): string | undefined {
    return this.cell.leaderAddress();
  }

  peerAddressOf(id: NodeId): string | undefined {
    return this.cell.core.members.peerAddressOf(id);
  }

  defaultPeerAddress(address: string): string {
    return this.cell.core.members.defaultPeerAddress(address);
  }

  bestTransferTarget(): NodeId | undefined {
    return this.cell.core.bestTransferTarget();
  }

  fsmStats(): ReturnType<LockCell['fsmStats']> {
    return this.cell.fsmStats();
  }

  tick(): void {
    this.cell.tick();
  }

  /** Proposes a command; resolves with the state machine's outcome once applied. */
  propose(command: Command): Promise<{ index: LogIndex; outcome: unknown }> {
    return new Promise((resolve, reject) =>
      this.cell.propose(command, (r) => (r.ok ? resolve({ index: r.value.index, outcome: r.value.result }) : reject(r.error))),
    );
  }

  proposeConfChange(change: ConfChange): Promise<LogIndex> {
    return new Promise((resolve, reject) => this.cell.core.proposeConfChange(change, (r) => (r.ok ? resolve(r.value) : reject(r.error))));
  }

  snapshotNow(): Promise<{ index: LogIndex; bytes: number }> {
    return new Promise((resolve, reject) => this.cell.core.snapshotNow((r) => (r.ok ? resolve(r.value) : reject(r.error))));
  }
}

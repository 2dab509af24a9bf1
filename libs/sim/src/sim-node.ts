/**
 * One simulated node: its process state across crashes and restarts (each
 * life numbered, so events of an older life are dropped), its drifting
 * monotonic clock, its disk, and the cell (or KV group) of its current life.
 */
import type { NodeId, Random } from '@fencer/base';
import type { LockCell } from '@fencer/cell';
import type { GroupCore } from '@fencer/group';
import type { SoftState } from '@fencer/raft';
import type { Replica } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import type { KvStateMachine } from './kv.js';
import type { SimDisk } from './store.js';
import { US_PER_MS } from './time.js';

/** A member's client address in the simulation (leader hints name it); only the form matters. */
export function simAddress(id: NodeId): string {
  return `sim-${id}:7001`;
}

export function simPeerAddress(id: NodeId): string {
  return `sim-${id}:7301`;
}

/** The node a leader hint names, if it is a simulated address. */
export function nodeOfAddress(address: string | undefined): NodeId | null {
  const m = address === undefined ? null : /^sim-(.+):7001$/.exec(address);
  return m ? (m[1] as NodeId) : null;
}

export type NodeState = 'starting' | 'up' | 'down' | 'removed';

/** What runs in one life of a node: the production lock cell, or the KV machine on the generic group core. */
export type NodeProgram =
  { readonly kind: 'lock'; readonly cell: LockCell } | { readonly kind: 'kv'; readonly core: GroupCore; readonly kv: KvStateMachine };

export class SimNode {
  state: NodeState = 'down';
  /** Bumped on every crash or removal: events of an older life are dropped. */
  life = 0;
  program: NodeProgram | null = null;
  store: RaftLogStore | null = null;
  pausedUntilUs = 0;
  deferred: (() => void)[] = [];
  /** Clock rate: a drifting node ticks faster or slower than real time. */
  rate = 1;
  localMs = 0;
  localAtUs = 0;
  /** Multiplies disk latency (a slow disk). */
  diskSlowFactor = 1;
  diskFreeAtUs = 0;
  role: SoftState['role'] = 'follower';
  leaderSinceUs = 0;
  joinedAtUs = 0;
  member = true;

  constructor(
    readonly id: NodeId,
    readonly num: number,
    readonly random: Random,
    readonly disk: SimDisk,
  ) {}

  get replica(): Replica | null {
    if (this.program === null) return null;
    return this.program.kind === 'lock' ? this.program.cell.core.replica : this.program.core.replica;
  }

  get cell(): LockCell | null {
    return this.program?.kind === 'lock' ? this.program.cell : null;
  }

  /** The hash of the state machine's snapshot: equal on replicas in the same state. */
  stateHash(): string {
    if (this.program === null) return '';
    return this.program.kind === 'lock' ? this.program.cell.fsm.stateHash() : this.program.kv.stateHash();
  }

  monoMs(nowUs: number): number {
    return this.localMs + ((nowUs - this.localAtUs) * this.rate) / US_PER_MS;
  }

  setRate(nowUs: number, rate: number): void {
    this.localMs = this.monoMs(nowUs);
    this.localAtUs = nowUs;
    this.rate = rate;
  }

  /** The process died or left: nothing of this life survives but the disk. */
  endLife(state: 'down' | 'removed'): void {
    this.life++;
    this.replica?.stop();
    this.program = null;
    this.store = null;
    this.state = state;
    this.role = 'follower';
    this.pausedUntilUs = 0;
    this.deferred = [];
    this.diskFreeAtUs = 0;
  }
}

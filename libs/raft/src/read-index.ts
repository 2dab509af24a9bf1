/**
 * ReadIndex bookkeeping on the leader (Raft dissertation §6.4): reads are
 * grouped into rounds; each round notes the commit index and is confirmed
 * by one heartbeat broadcast carrying the round's id as `context`. When a
 * majority of voters answered a round's heartbeat, that round and every
 * earlier one are released: leadership was confirmed after all of them
 * arrived.
 */
import { assert } from '@fencer/base';
import type { NodeId } from '@fencer/base';

export interface ReadRound {
  readonly id: number;
  readonly requestCtxs: string[];
  /** Commit index when the latest read joined the round: every read in it sees at least this. */
  index: number;
  readonly acks: Set<NodeId>;
  /** Whether the round's heartbeat went out; reads join only an unsent round. */
  sent: boolean;
}

export class ReadIndexQueue {
  /** Reads that arrived before the leader's blank entry of its term committed. */
  awaitingBlank: string[] = [];
  rounds: ReadRound[] = [];
  private nextRoundId = 1;
  queued = 0;

  /** Adds a read to the open round (opening one if the last was sent). */
  join(requestCtx: string, commitIndex: number, self: NodeId): void {
    let round = this.rounds[this.rounds.length - 1];
    if (round === undefined || round.sent) {
      round = { id: this.nextRoundId++, requestCtxs: [], index: commitIndex, acks: new Set([self]), sent: false };
      this.rounds.push(round);
    }
    assert(commitIndex >= round.index, 'the commit index noted for reads only grows');
    round.requestCtxs.push(requestCtx);
    round.index = commitIndex;
    this.queued++;
  }

  /** The round whose heartbeat should go out now, if any; marks it sent. */
  takeUnsent(): ReadRound | undefined {
    const round = this.rounds[this.rounds.length - 1];
    if (round === undefined || round.sent) return undefined;
    round.sent = true;
    return round;
  }

  hasUnsent(): boolean {
    const round = this.rounds[this.rounds.length - 1];
    return round !== undefined && !round.sent;
  }

  /**
   * Records that `from` answered the heartbeat of round `context`. Returns
   * the rounds released (oldest first) when that round reached a quorum.
   */
  ack(from: NodeId, context: string, hasQuorum: (acks: ReadonlySet<NodeId>) => boolean): ReadRound[] {
    const id = Number(context);
    if (!Number.isSafeInteger(id)) return [];
    const at = this.rounds.findIndex((r) => r.id === id);
    if (at < 0) return [];
    const round = this.rounds[at] as ReadRound;
    // Only a heartbeat that went out can be answered: an ack for an unsent round is forged.
    if (!round.sent) return [];
    round.acks.add(from);
    if (!hasQuorum(round.acks)) return [];
    const released = this.rounds.splice(0, at + 1);
    for (const r of released) this.queued -= r.requestCtxs.length;
    assert(this.queued >= this.awaitingBlank.length, 'read accounting stays consistent');
    return released;
  }

  clear(): void {
    this.awaitingBlank = [];
    this.rounds = [];
    this.queued = 0;
  }
}

/**
 * The simulated network between replicas: every message gets its own delay
 * (log-normal body, Pareto tail), so messages reorder; some are dropped or
 * duplicated; directed links can be cut to form partitions of any shape. A
 * link cut while a message is in flight loses that message too.
 */
import type { NodeId, Random } from '@fencer/base';
import { type Message, MessageType } from '@fencer/raft';
import { assert } from '@fencer/base';
import type { Scheduler } from './scheduler.js';
import { Tag } from './tags.js';

export interface NetworkProfile {
  readonly dropP: number;
  readonly duplicateP: number;
  /** Log-normal body of the delay distribution. */
  readonly latencyMedianUs: number;
  readonly latencySigma: number;
  /** With probability tailP a message instead takes a Pareto-distributed delay (scale, shape alpha). */
  readonly tailP: number;
  readonly tailScaleUs: number;
  readonly tailAlpha: number;
  readonly latencyMaxUs: number;
}

/** No faults: a LAN's worth of jitter and nothing else (the quiet tail of a run). */
export const quietNetwork: NetworkProfile = {
  dropP: 0,
  duplicateP: 0,
  latencyMedianUs: 500,
  latencySigma: 0.3,
  tailP: 0,
  tailScaleUs: 0,
  tailAlpha: 1.5,
  latencyMaxUs: 5_000,
};

export const faultyNetwork: NetworkProfile = {
  dropP: 0.03,
  duplicateP: 0.02,
  latencyMedianUs: 1_000,
  latencySigma: 0.8,
  tailP: 0.02,
  tailScaleUs: 20_000,
  tailAlpha: 1.2,
  latencyMaxUs: 3_000_000,
};

export function linkKey(from: NodeId, to: NodeId): string {
  return `${from}>${to}`;
}

export class Network {
  profile: NetworkProfile = faultyNetwork;
  private cut = new Set<string>();
  messagesSent = 0;
  messagesDropped = 0;
  messagesDelivered = 0;

  constructor(
    private readonly scheduler: Scheduler,
    private readonly random: Random,
    private readonly deliver: (message: Message) => void,
    private readonly nodeNumber: (id: NodeId) => number,
  ) {}

  /** Replaces the set of cut directed links. */
  setCut(links: Iterable<readonly [NodeId, NodeId]>): void {
    this.cut = new Set();
    for (const [from, to] of links) {
      assert(from !== to, 'a node is never cut from itself');
      this.cut.add(linkKey(from, to));
    }
  }

  heal(): void {
    this.cut = new Set();
  }

  get cutLinks(): number {
    return this.cut.size;
  }

  isCut(from: NodeId, to: NodeId): boolean {
    return this.cut.size > 0 && this.cut.has(linkKey(from, to));
  }

  send(messages: readonly Message[]): void {
    for (const m of messages) {
      this.messagesSent++;
      if (this.isCut(m.from, m.to) || (this.profile.dropP > 0 && this.random.chance(this.profile.dropP))) {
        this.messagesDropped++;
        continue;
      }
      const copies = this.profile.duplicateP > 0 && this.random.chance(this.profile.duplicateP) ? 2 : 1;
      for (let c = 0; c < copies; c++) {
        const tag = Tag.message | (this.nodeNumber(m.to) << 8) | (this.nodeNumber(m.from) << 16);
        this.scheduler.after(this.sampleDelayUs(), tag, () => {
          if (this.isCut(m.from, m.to)) {
            this.messagesDropped++;
            return;
          }
          this.messagesDelivered++;
          this.deliver(m);
        });
      }
    }
  }

  sampleDelayUs(): number {
    const p = this.profile;
    let d: number;
    if (p.tailP > 0 && this.random.chance(p.tailP)) {
      // Pareto: scale / U^(1/alpha), U in (0, 1].
      d = p.tailScaleUs / Math.pow(1 - this.random.float(), 1 / p.tailAlpha);
    } else {
      d = p.latencyMedianUs * Math.exp(p.latencySigma * gaussian(this.random));
    }
    return Math.max(1, Math.min(p.latencyMaxUs, Math.round(d)));
  }
}

/** A standard normal draw (Box-Muller; the sine half is thrown away to keep draws independent of call order). */
export function gaussian(random: Random): number {
  const u = 1 - random.float();
  const v = random.float();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** A fixed small number per message type, for the trace hash (the same in every process). */
const messageTypeCode = new Map<string, number>(Object.values(MessageType).map((t, i) => [t, i + 1]));
export function messageCode(type: string): number {
  return messageTypeCode.get(type) ?? 0;
}

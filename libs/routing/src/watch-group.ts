/**
 * Watch coalescing: identical client watches (same lock name or prefix)
 * share one upstream watch to the cell, as etcd's grpc-proxy does.
 *
 * A group follows its upstream with a cursor (watch-cursor.ts) and keeps
 * the last WATCH_BUFFER_EVENTS_MAX events it passed on: every event above
 * `floor` is in the buffer. A client watch joins a group at a revision it
 * already has everything up to (its since_revision, or the PROGRESS that
 * closed its own snapshot): the group sends it the buffered events above
 * that revision, then every live event, in the upstream's order. So each
 * member sees every event once, in order, whatever the others do.
 *
 * A member that does not read (its stream's write buffer grows past
 * `backlogMax`) is cut with RESOURCE_EXHAUSTED SLOW_WATCHER, retryable: it
 * resumes from its last revision, from the buffer if still there. The
 * upstream never waits for a member, so one slow reader stalls nobody.
 * The last member to leave cancels the upstream.
 */
import type { ServiceError } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { WATCH_BUFFER_EVENTS_MAX } from './limits.js';
import { UpstreamWatch, type WatchDeps, type WatchTarget } from './upstream-watch.js';
import { WatchCursor } from './watch-cursor.js';

/** A client watch as a group sees it. */
export interface GroupMember {
  /** Passes on one event; the member may leave the group (and stop) inside it. */
  deliver(ev: lockservice.WatchEvent): void;
  /** The group ended: the member ends with the upstream's error, or with the stream's end. */
  stop(err?: Partial<ServiceError>): void;
}

const keyOf = (t: WatchTarget): string => `${t.prefix ? 'P' : 'N'}${t.name}`;

/** The groups of one router, by watch target. */
export class WatchGroups {
  private readonly groups = new Map<string, WatchGroup>();

  constructor(
    private readonly deps: WatchDeps,
    private readonly bufferMax = WATCH_BUFFER_EVENTS_MAX,
  ) {}

  /**
   * Joins `member` to the group of `target` after `revision` (creating the
   * group there when there is none). False when the group's buffer no longer
   * reaches back to `revision`: the member keeps its own stream.
   */
  join(target: WatchTarget, revision: number, member: GroupMember): WatchGroup | undefined {
    if (revision <= 0) return undefined;
    const key = keyOf(target);
    let group = this.groups.get(key);
    if (group && !group.covers(revision)) return undefined;
    if (!group) {
      const created = new WatchGroup(this.deps, target, revision, this.bufferMax, () => {
        if (this.groups.get(key) === created) this.groups.delete(key);
        this.deps.metrics.watchGroups.set(this.groups.size);
      });
      group = created;
      this.groups.set(key, group);
      this.deps.metrics.watchGroups.set(this.groups.size);
      group.start();
    }
    group.add(member, revision);
    return group;
  }

  get size(): number {
    return this.groups.size;
  }
}

export class WatchGroup {
  private readonly upstream: UpstreamWatch;
  private readonly cursor: WatchCursor;
  /** Members and the revision each joined after (it gets only events above it). */
  private readonly members = new Map<GroupMember, number>();
  /** The last events passed on, oldest first, from `head` on (a queue without shifting). */
  private buffer: lockservice.WatchEvent[] = [];
  private head = 0;
  /** Every event above this revision is in the buffer. */
  private floor: number;
  private live = true;

  constructor(
    deps: WatchDeps,
    target: WatchTarget,
    revision: number,
    private readonly bufferMax: number,
    private readonly closed: () => void,
  ) {
    this.cursor = new WatchCursor(revision);
    this.floor = revision;
    this.upstream = new UpstreamWatch(deps, target, {
      since: () => this.cursor.resumeFrom(),
      event: (ev) => this.event(ev),
      ended: (err) => this.end(err),
    });
  }

  start(): void {
    this.upstream.start();
  }

  /** Whether a member that has everything up to `revision` can join without a gap. */
  covers(revision: number): boolean {
    return this.live && revision >= this.floor;
  }

  /** Adds a member: the buffered events above its revision at once, then live ones. */
  add(member: GroupMember, revision: number): void {
    this.members.set(member, revision);
    for (let i = this.head; i < this.buffer.length; i++) {
      const ev = this.buffer[i]!;
      if (ev.revision > revision) member.deliver(ev);
      if (!this.members.has(member)) return;
    }
  }

  leave(member: GroupMember): void {
    if (!this.members.delete(member) || this.members.size > 0 || !this.live) return;
    this.live = false;
    this.upstream.stop();
    this.closed();
  }

  get size(): number {
    return this.members.size;
  }

  private event(ev: lockservice.WatchEvent): void {
    if (!this.cursor.admit(ev)) return;
    if (ev.type !== lockservice.WatchEventType.WATCH_EVENT_TYPE_PROGRESS) this.remember(ev);
    // Deleting from a Map while iterating it is safe: a member cut here is not visited again.
    for (const [member, since] of this.members) if (ev.revision > since) member.deliver(ev);
  }

  private remember(ev: lockservice.WatchEvent): void {
    this.buffer.push(ev);
    if (this.buffer.length - this.head <= this.bufferMax) return;
    this.floor = Math.max(this.floor, this.buffer[this.head]!.revision);
    this.buffer[this.head++] = undefined as unknown as lockservice.WatchEvent;
    // Compact once the dropped half outweighs the kept one: amortized O(1) per event.
    if (this.head > this.bufferMax) {
      this.buffer = this.buffer.slice(this.head);
      this.head = 0;
    }
  }

  /** The upstream ended for good: every member ends with it. */
  private end(err?: Partial<ServiceError>): void {
    if (!this.live) return;
    this.live = false;
    this.closed();
    for (const member of [...this.members.keys()]) member.stop(err);
    this.members.clear();
  }
}

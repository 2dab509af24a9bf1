/**
 * Membership as a function of log position.
 *
 * Rule (dissertation §4.1, single-server changes): a server uses the latest
 * configuration in its log, committed or not; a ConfChange takes effect on
 * each server as soon as the entry is appended to its log. So when a
 * follower's uncommitted suffix is overwritten, the configuration must fall
 * back to the one in force before the overwritten entries: this history
 * keeps one configuration per ConfChange entry above a base (the snapshot's
 * configuration, or the bootstrap one).
 */
import { assert } from '@fencer/base';
import type { ConfState, Entry } from './types.js';
import { EntryType } from './types.js';
import { applyConfChange, decodeConfChange } from './conf-change.js';

interface ConfAt {
  readonly index: number;
  readonly conf: ConfState;
}

export class ConfHistory {
  private base: ConfAt;
  /** Ascending by index, every index above base.index. One element per ConfChange entry in the log. */
  private changes: ConfAt[] = [];

  constructor(baseIndex: number, baseConf: ConfState) {
    this.base = { index: baseIndex, conf: baseConf };
  }

  current(): ConfState {
    return this.latest().conf;
  }

  /** Index of the entry that made the current configuration (base index when none is in the log). */
  currentIndex(): number {
    return this.latest().index;
  }

  /** The configuration in force at log position `index` (at or above the base). */
  at(index: number): ConfState {
    assert(index >= this.base.index, `configuration at ${index} is below the compacted base ${this.base.index}`);
    for (let i = this.changes.length - 1; i >= 0; i--) {
      const c = this.changes[i] as ConfAt;
      if (c.index <= index) return c.conf;
    }
    return this.base.conf;
  }

  /** Entries from ents[0].index on replace the log's suffix: forget changes there, then record the new ones. */
  onAppend(ents: readonly Entry[]): void {
    if (ents.length === 0) return;
    const from = (ents[0] as Entry).index;
    assert(from > this.base.index, `append at ${from} at or below the configuration base ${this.base.index}`);
    while (this.changes.length > 0 && (this.changes[this.changes.length - 1] as ConfAt).index >= from) this.changes.pop();
    for (const e of ents) {
      if (e.type !== EntryType.ConfChange) continue;
      this.changes.push({ index: e.index, conf: applyConfChange(this.current(), decodeConfChange(e.data)) });
    }
  }

  /**
   * A snapshot from the leader replaced the log: from its index on, its
   * configuration is in force. History up to our old commit index stays,
   * because a Ready handed out before the snapshot arrived may still be
   * applying committed entries below it (and may ask what was in force
   * there); what lay between that commit index and the snapshot was never
   * committed here and is dropped.
   */
  restore(snapshotIndex: number, snapshotConf: ConfState, committedBefore: number): void {
    assert(snapshotIndex > committedBefore, 'a restored snapshot lies above the commit index');
    while (this.changes.length > 0 && (this.changes[this.changes.length - 1] as ConfAt).index > committedBefore) this.changes.pop();
    if (snapshotIndex <= this.base.index) {
      this.base = { index: snapshotIndex, conf: snapshotConf };
      this.changes = [];
      return;
    }
    this.changes.push({ index: snapshotIndex, conf: snapshotConf });
  }

  /** Folds changes at or below `index` into the base (their entries are compacted). */
  compact(index: number): void {
    if (index <= this.base.index) return;
    let folded = this.base;
    while (this.changes.length > 0 && (this.changes[0] as ConfAt).index <= index) folded = this.changes.shift() as ConfAt;
    this.base = { index, conf: folded.conf };
  }

  private latest(): ConfAt {
    return this.changes.length > 0 ? (this.changes[this.changes.length - 1] as ConfAt) : this.base;
  }
}

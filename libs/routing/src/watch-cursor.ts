/**
 * Where a router's watch stream stands, so that a reopened upstream stream
 * repeats nothing and skips nothing. One log entry can yield several events
 * at one revision, so a revision is only known complete once a later
 * revision or a PROGRESS at it arrived: `cur` is the newest revision passed
 * on and `seenAtCur` how many of its events were. A reopen resumes from
 * cur - 1 and drops the first `seenAtCur` events at cur, as the client
 * library does (libs/client/src/watch.ts).
 */
import { lockservice } from '@fencer/protocol';

const { WATCH_EVENT_TYPE_PROGRESS: PROGRESS, WATCH_EVENT_TYPE_SNAPSHOT: SNAPSHOT } = lockservice.WatchEventType;

export class WatchCursor {
  private cur: number;
  private seenAtCur = 0;
  /** Events at `cur` the reopened stream repeats from before the break. */
  private skip = 0;

  constructor(sinceRevision: number) {
    this.cur = sinceRevision;
  }

  /** The newest revision passed on (complete unless events at it may follow). */
  get revision(): number {
    return this.cur;
  }

  /** The since_revision of the next stream; it arms the skip of the events it repeats. */
  resumeFrom(): number {
    this.skip = this.seenAtCur;
    return this.seenAtCur > 0 ? this.cur - 1 : this.cur;
  }

  /** Whether `ev` is new (to pass on); moves the position past it. */
  admit(ev: lockservice.WatchEvent): boolean {
    // A stream from 0 starts with SNAPSHOTs, closed by the PROGRESS that carries their revision.
    if (ev.type === SNAPSHOT) return this.cur === 0;
    if (ev.type === PROGRESS) {
      if (ev.revision < this.cur) return false;
      this.moveTo(ev.revision, 0);
      return true;
    }
    if (ev.revision < this.cur) return false;
    if (ev.revision === this.cur) {
      if (this.skip > 0) {
        this.skip--;
        return false;
      }
      this.seenAtCur++;
      return true;
    }
    this.moveTo(ev.revision, 1);
    return true;
  }

  private moveTo(revision: number, seen: number): void {
    this.cur = revision;
    this.seenAtCur = seen;
    this.skip = 0;
  }
}

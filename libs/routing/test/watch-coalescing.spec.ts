/**
 * Goal: identical watches through a router share one upstream watch to the
 * cell (watch-group.ts), and each client still gets every event once, in
 * order, with its own cancel: 200 watchers of one prefix see every grant
 * as a direct watcher of the cell does; a late joiner gets exactly what
 * followed its revision, from the router's buffer; a break in the middle of
 * one revision's events (a leader change) and a move to another cell
 * (NAMESPACE_MOVING, then the namespace's new cell) resume the shared
 * stream with no gap and no repeat; a client that stops reading is cut
 * with the retryable SLOW_WATCHER while the others go on; with coalescing
 * off every watch keeps its own upstream.
 * Method: an in-process router (buildRouter) on 127.0.0.1:0 with a static
 * routing table in front of the client library's fake LockService, which
 * records every Watch request, counts the streams open on it, and takes
 * raw events (several at one revision, as one log entry yields them).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { FakeLockService } from '@fencer/client/testing';
import { fromServiceError, lockservice } from '@fencer/protocol';
import { TestClient, eventually } from '@fencer/fleet/contract';
import { buildRouter, StaticRoutingSource, type Router, type RouterDeps } from '../src/index.js';

const T = lockservice.WatchEventType;
const PREFIX = '/ls/ns/w/';
const WAIT_MS = 20_000;

let router: Router | undefined;
const fakes: FakeLockService[] = [];
let client: TestClient | undefined;
const watchers: Watcher[] = [];
afterEach(async () => {
  for (const w of watchers.splice(0)) w.cancel();
  client?.close();
  await router?.close();
  for (const f of fakes.splice(0)) await f.stop();
  router = undefined;
  client = undefined;
});

function table(cellOfNs: string, cells: Record<string, string>, version = 1): ConstructorParameters<typeof StaticRoutingSource>[0] {
  return {
    version,
    cells: new Map(Object.entries(cells).map(([id, at]) => [id, { id, replicas: [at] }])),
    routes: new Map([['ns', { namespace: 'ns', cell: cellOfNs, state: 'active' as const }]]),
  };
}

async function start(opts: Partial<RouterDeps> = {}): Promise<{ at: string; fake: FakeLockService; source: StaticRoutingSource }> {
  const fake = await FakeLockService.start();
  fakes.push(fake);
  fake.revision = 10; // a real cell's first revisions are its blank entries; a resume from "just before" needs one above 1
  const source = new StaticRoutingSource(table('cell-1', { 'cell-1': fake.address }));
  router = buildRouter({ source, logger: pino({ level: 'silent' }), ...opts });
  const at = await router.listen('127.0.0.1:0');
  client = new TestClient([fake.address]);
  return { at, fake, source };
}

/** One raw Watch stream through the router, recording what it gets. */
class Watcher {
  readonly events: lockservice.WatchEvent[] = [];
  error: ReturnType<typeof fromServiceError> | undefined;
  ended = false;
  private readonly own: InstanceType<typeof lockservice.LockServiceClient> | undefined;
  readonly stream: ReturnType<InstanceType<typeof lockservice.LockServiceClient>['watch']>;

  /** `own`: on a connection of its own (a paused stream must not hold up the others' shared HTTP/2 window). */
  constructor(at: string, sinceRevision = 0, own = false) {
    this.own = own
      ? new lockservice.LockServiceClient(at, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 })
      : undefined;
    const stub = this.own ?? client!.raw(at);
    this.stream = stub.watch({ name: PREFIX, prefix: true, sinceRevision });
    this.stream.on('data', (e: lockservice.WatchEvent) => this.events.push(e));
    this.stream.on('error', (e: ServiceError) => (this.error = fromServiceError(e)));
    this.stream.on('end', () => (this.ended = true));
    watchers.push(this);
  }

  /** The changes seen (no SNAPSHOT or PROGRESS), as revision:type:name. */
  get changes(): string[] {
    return this.events.filter((e) => e.type !== T.WATCH_EVENT_TYPE_PROGRESS && e.type !== T.WATCH_EVENT_TYPE_SNAPSHOT).map(label);
  }

  started(): boolean {
    return this.events.some((e) => e.type === T.WATCH_EVENT_TYPE_PROGRESS);
  }

  cancel(): void {
    this.stream.cancel();
    this.own?.close();
  }
}

const label = (e: lockservice.WatchEvent): string => `${e.revision}:${e.type}:${e.name}`;

function change(revision: number, name: string, type = T.WATCH_EVENT_TYPE_ACQUIRED): lockservice.WatchEvent {
  return { revision, type, name, sessionId: 'ns:s', token: revision, lock: undefined };
}

/** n grants of one lock by one session, each released again: 2n events. */
async function grants(n: number, name = `${PREFIX}l`): Promise<void> {
  const { sessionId } = await client!.openSession('ns');
  for (let i = 0; i < n; i++) {
    const g = await client!.acquire({ sessionId, name });
    await client!.call('release', { sessionId, name, token: g.token });
  }
}

describe('watch coalescing in the router', () => {
  it('200 watchers of one prefix share one upstream watch and each sees every grant, in order, as a direct watcher does', async () => {
    const { at, fake } = await start();
    const direct = new Watcher(fake.address);
    const many = Array.from({ length: 200 }, () => new Watcher(at));
    await eventually(() => (direct.started() && many.every((w) => w.started()) ? true : undefined), WAIT_MS, 'every watch to start');
    await eventually(() => (fake.watchStreams === 2 ? true : undefined), WAIT_MS, 'the router to keep one upstream (and the direct one)');
    await expect(router!.metrics.watchUpstreams.get()).resolves.toMatchObject({ values: [{ value: 1 }] });
    await grants(50);
    await eventually(() => (many.every((w) => w.changes.length === 100) ? true : undefined), WAIT_MS, 'every grant at every watcher');
    expect(direct.changes).toHaveLength(100);
    for (const w of many) expect(w.changes).toEqual(direct.changes);
    expect(fake.watchStreams).toBe(2);
  });

  it('a late joiner from a revision in the buffer gets exactly what followed it, without a new upstream watch', async () => {
    const { at, fake } = await start();
    const first = new Watcher(at);
    await eventually(() => (first.started() ? true : undefined), WAIT_MS, 'the first watch to start');
    await grants(5);
    await eventually(() => (first.changes.length === 10 ? true : undefined), WAIT_MS, 'the first grants');
    const mid = first.events.filter((e) => e.type === T.WATCH_EVENT_TYPE_ACQUIRED)[2]!.revision;
    const opened = fake.callsOf('watch').length;
    const late = new Watcher(at, mid);
    await grants(2);
    await eventually(() => (first.changes.length === 14 && late.changes.length > 0 ? true : undefined), WAIT_MS, 'the later grants');
    await eventually(
      () => (late.changes.length === first.changes.filter((c) => Number(c.split(':')[0]) > mid).length ? true : undefined),
      WAIT_MS,
      'the late joiner to catch up',
    );
    expect(late.changes).toEqual(first.changes.filter((c) => Number(c.split(':')[0]) > mid));
    expect(fake.callsOf('watch').length).toBe(opened);
    // A late joiner from now gets its own snapshot, then joins the group.
    const fromNow = new Watcher(at);
    await eventually(() => (fromNow.started() ? true : undefined), WAIT_MS, 'the watch from now to start');
    expect(fromNow.events.filter((e) => e.type === T.WATCH_EVENT_TYPE_SNAPSHOT)).toHaveLength(0); // the lock is free: nothing live
    await eventually(() => (fake.watchStreams === 1 ? true : undefined), WAIT_MS, 'the watch from now to join the group');
    await grants(1);
    await eventually(() => (fromNow.changes.length === 2 ? true : undefined), WAIT_MS, 'the grant at the watch from now');
    expect(fromNow.changes).toEqual(first.changes.slice(-2));
  });

  it('each member cancels alone; the last one cancels the upstream', async () => {
    const { at, fake } = await start();
    const [a, b] = [new Watcher(at), new Watcher(at)];
    await eventually(() => (a.started() && b.started() && fake.watchStreams === 1 ? true : undefined), WAIT_MS, 'one shared upstream');
    a.cancel();
    await grants(1);
    await eventually(() => (b.changes.length === 2 ? true : undefined), WAIT_MS, 'the grant at the watcher left');
    b.cancel();
    await eventually(() => (fake.watchStreams === 0 ? true : undefined), WAIT_MS, 'the upstream to be cancelled');
    await expect(router!.metrics.watchGroups.get()).resolves.toMatchObject({ values: [{ value: 0 }] });
  });

  it("a leader change in the middle of one revision's events resumes the shared stream with the rest of them, none twice", async () => {
    const { at, fake } = await start();
    const [a, b] = [new Watcher(at), new Watcher(at)];
    await eventually(() => (a.started() && b.started() && fake.watchStreams === 1 ? true : undefined), WAIT_MS, 'one shared upstream');
    const R = fake.revision + 1;
    fake.appendEvents([change(R, `${PREFIX}a`, T.WATCH_EVENT_TYPE_RELEASED), change(R, `${PREFIX}a`)]);
    await eventually(() => (a.changes.length === 2 && b.changes.length === 2 ? true : undefined), WAIT_MS, 'the first two events');
    const opened = fake.callsOf('watch').length;
    fake.breakWatches('NOT_LEADER');
    fake.appendEvents([change(R, `${PREFIX}b`)]); // the same entry's third event, while the router reconnects
    fake.appendEvents([change(R + 1, `${PREFIX}c`)]);
    await eventually(() => (a.changes.length >= 4 && b.changes.length >= 4 ? true : undefined), WAIT_MS, 'the resumed stream');
    const want = [`${R}:3:${PREFIX}a`, `${R}:2:${PREFIX}a`, `${R}:2:${PREFIX}b`, `${R + 1}:2:${PREFIX}c`];
    expect(a.changes).toEqual(want);
    expect(b.changes).toEqual(want);
    const resumed = fake.callsOf('watch').slice(opened) as lockservice.WatchRequest[];
    expect(resumed.map((r) => r.sinceRevision)).toEqual([R - 1]);
  });

  it("a move: NAMESPACE_MOVING, then the shared stream resumes on the namespace's new cell from where it was", async () => {
    const { at, fake, source } = await start();
    const target = await FakeLockService.start();
    fakes.push(target);
    const [a, b] = [new Watcher(at), new Watcher(at)];
    await eventually(() => (a.started() && b.started() && fake.watchStreams === 1 ? true : undefined), WAIT_MS, 'one shared upstream');
    const R = fake.revision + 1;
    fake.appendEvents([change(R, `${PREFIX}a`)]);
    await eventually(() => (a.changes.length === 1 && b.changes.length === 1 ? true : undefined), WAIT_MS, 'the event before the move');
    // The new cell imported the namespace at R and has gone on since. (A real cell ends its watchers with a PROGRESS
    // at the freeze first; without it the router cannot know R complete and resumes from just before it.)
    target.appendEvents([change(R, `${PREFIX}a`), change(R + 5, `${PREFIX}b`)]);
    source.set(table('cell-2', { 'cell-1': fake.address, 'cell-2': target.address }, 2));
    fake.breakWatches('NAMESPACE_MOVING');
    await eventually(() => (a.changes.length === 2 && b.changes.length === 2 ? true : undefined), WAIT_MS, 'the event after the move');
    expect(a.changes).toEqual([`${R}:2:${PREFIX}a`, `${R + 5}:2:${PREFIX}b`]);
    expect(b.changes).toEqual(a.changes);
    expect((target.callsOf('watch') as lockservice.WatchRequest[]).map((r) => r.sinceRevision)).toEqual([R - 1]);
    expect(target.watchStreams).toBe(1);
  });

  it('a member that stops reading is cut with SLOW_WATCHER, retryable, while the others get every event', async () => {
    const { at, fake } = await start({ watchOptions: { memberBacklogMax: 50 } });
    const [fast, slow] = [new Watcher(at), new Watcher(at, 0, true)];
    await eventually(
      () => (fast.started() && slow.started() && fake.watchStreams === 1 ? true : undefined),
      WAIT_MS,
      'one shared upstream',
    );
    slow.stream.pause();
    // Enough bulky events to fill the transport's windows and then the stream's buffer; bounded in count.
    const bulk = 'x'.repeat(8_192);
    const perBatch = 200;
    let revision = fake.revision;
    // The client hears of the cut only once it reads again (the status follows the messages already sent): the router's counter says it first.
    const cut = async (): Promise<boolean> => (await router!.metrics.slowWatchers.get()).values[0]?.value === 1;
    for (let batch = 0; batch < 100 && !(await cut()); batch++) {
      for (let i = 0; i < perBatch; i++) fake.appendEvents([{ ...change(++revision, `${PREFIX}l${i}`), sessionId: `ns:${bulk}` }]);
      const want = (batch + 1) * perBatch;
      await eventually(() => (fast.changes.length === want ? true : undefined), WAIT_MS, 'the fast reader');
    }
    slow.stream.resume();
    await eventually(() => slow.error, WAIT_MS, 'the slow reader to be cut');
    expect(slow.error!.code).toBe('SLOW_WATCHER');
    await expect(router!.metrics.slowWatchers.get()).resolves.toMatchObject({ values: [{ value: 1 }] });
    const total = revision - 10;
    await eventually(() => (fast.changes.length === total ? true : undefined), WAIT_MS, 'every event at the fast reader');
    expect(fast.changes.map((c) => Number(c.split(':')[0]))).toEqual(Array.from({ length: total }, (_, i) => 11 + i));
    expect(fast.error).toBeUndefined();
  }, 60_000);

  it('with coalescing off, every watch keeps its own upstream', async () => {
    const { at, fake } = await start({ coalesceWatches: false });
    const ws = [new Watcher(at), new Watcher(at), new Watcher(at)];
    await eventually(() => (ws.every((w) => w.started()) ? true : undefined), WAIT_MS, 'every watch to start');
    await grants(1);
    await eventually(() => (ws.every((w) => w.changes.length === 2) ? true : undefined), WAIT_MS, 'the grant everywhere');
    expect(fake.watchStreams).toBe(3);
  });
});

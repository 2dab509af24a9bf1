/**
 * Faults with one client on the faulty replica's side. Each puts a replica
 * out of step with the cell, lets one client reach only that replica, and
 * has that client run a probe (workload-config.ts ProbeStep) at the moment
 * the replica's answers would be wrong if it cut a corner. A correct cell
 * answers the probe correctly or not at all; a cell with the matching
 * planted bug answers it wrongly at the first try, whatever the machine's
 * speed, so a run scheduled around one of these catches the bug at its
 * first seed:
 *   slow-leader-isolated — a leader that is slow to notice it lost its
 *     quorum, cut from its peers: it must extend no lease (heartbeats) and
 *     grant nothing (the probe's Acquire) without its followers;
 *   lagging-follower — a follower that applies entries seconds late: it
 *     must not answer a read from its own state (the probe reads back the
 *     lock it was just granted).
 * Nothing here needs faketime: the slow leader is slow by configuration
 * (a long election timeout), not by its clock.
 */
import type { Random } from '@fencer/base';
import type { ChaosCell } from './cell.js';
import { isolate } from './partitions.js';
import type { LinkFault, LinkProxy } from './proxy.js';
import { isProbeAnswer, type ProbeRequest, type ProbeStep } from './workload-config.js';
import type { WorkerProcess } from './nemesis.js';

/** What one-sided faults need of the nemesis. */
export interface FaultContext {
  readonly cell: ChaosCell;
  readonly workers: readonly WorkerProcess[];
  readonly random: Random;
  readonly ttlMs: number;
  /** An up follower of a known leader, at random. */
  pickFollower(): Promise<string | undefined>;
}

/** A fault that began: what it did, how long it lasts, how to heal it. */
export interface Started {
  readonly detail: string;
  readonly durationMs: number;
  readonly heal: () => Promise<string>;
}

/** A link that refuses: every connection is reset at its first bytes, so the client moves on at once. */
export const REFUSED: LinkFault = { dropRate: 1 };

/**
 * The slow leader's Raft timing: cell-node's default tick, an election
 * timeout of 10 s, and the TTL floor cell-node then requires (at least
 * twice the election timeout; the default TTL may not be below it).
 * Check-quorum looks once per election timeout and steps a leader down
 * only when no majority spoke to it since the last look: cut off SETTLE_MS
 * after it became leader, this one passes the look at 10 s and leads on
 * until the one at 20 s, longer than the fault lasts.
 */
const SLOW_QUORUM_TICK_MS = 100;
const SLOW_QUORUM_ELECTION_TICKS = 100;
const SLOW_QUORUM_TTL_MIN_MS = 2 * SLOW_QUORUM_ELECTION_TICKS * SLOW_QUORUM_TICK_MS;
export const SLOW_QUORUM_ARGS: readonly string[] = [
  '--tick-ms',
  String(SLOW_QUORUM_TICK_MS),
  '--election-ticks',
  String(SLOW_QUORUM_ELECTION_TICKS),
  '--ttl-min-ms',
  String(SLOW_QUORUM_TTL_MIN_MS),
  '--ttl-default-ms',
  String(SLOW_QUORUM_TTL_MIN_MS),
];

/** How long a restarted replica gets to answer its admin Status. */
const REPLICA_START_MS = 30_000;
/** How long the slow-leader fault tries to make its replica leader. */
const SLOW_LEADER_START_MS = 40_000;
/** Clients find the slow replica as leader before it is cut off. */
const SETTLE_MS = 1_500;
/**
 * How late the lagging follower hears anything: every peer message into it
 * is held back this long (within the proxy's delay bound), so it applies an
 * entry this long after the entry committed.
 */
const FOLLOWER_LAG_MS = 4_000;
/** A probe step's answer: the longest step (an Acquire's retries, then a read) ends within this. */
const PROBE_ANSWER_MS = 45_000;
/** The probe session must exist before the slow leader is cut off; its OpenSession gets this long. */
const PROBE_OPEN_MS = 15_000;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

let probeIds = 0;

/** Asks a worker for a probe step; resolves with its outcome, or with why none came (never rejects). */
export function askProbe(w: WorkerProcess, step: ProbeStep, timeoutMs: number): Promise<string> {
  const id = ++probeIds;
  return new Promise((resolve) => {
    const finish = (outcome: string): void => {
      clearTimeout(timer);
      w.child.off('message', onMessage);
      resolve(outcome);
    };
    const onMessage = (m: unknown): void => {
      if (isProbeAnswer(m) && m.probeDone === id) finish(m.outcome);
    };
    const timer = setTimeout(() => finish(`no answer within ${timeoutMs} ms`), timeoutMs);
    w.child.on('message', onMessage);
    const request: ProbeRequest = { probe: step, id };
    try {
      w.child.send(request, (error) => {
        if (error) finish(`not sent: ${error.message}`);
      });
    } catch (error) {
      finish(`not sent: ${(error as Error).message}`);
    }
  });
}

/** Polls until `ok()` holds or `ms` pass; whether it held. */
async function until(ok: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await ok()) return true;
    await sleep(300);
  }
  return false;
}

/** Transfers leadership to `id` from whoever leads, until it leads or `ms` pass; the last answer. */
async function transferTo(cell: ChaosCell, id: string, ms: number): Promise<string> {
  let last = '';
  await until(async () => {
    const current = await cell.leader();
    if (current === id) last = `leader now ${id}`;
    else if (current !== undefined && (await cell.status(id, 2_000)) !== undefined) last = await cell.transferLeadership(current, id);
    return last.includes(`leader now ${id}`);
  }, ms);
  return last;
}

/** Refuses the worker's links to every node but `at`; returns them, to heal. */
function onlyReaches(w: WorkerProcess, at: number): LinkProxy[] {
  const refused = w.links.filter((_, i) => i !== at);
  for (const l of refused) l.setFault(REFUSED);
  return refused;
}

/** How long each step of a fault's start took, for its record. */
function stopwatch(): { lap(step: string): void; text(): string } {
  const laps: string[] = [];
  let last = Date.now();
  return {
    lap(step) {
      const now = Date.now();
      laps.push(`${step} ${now - last} ms`);
      last = now;
    },
    text: () => laps.join(', '),
  };
}

/** The probe's outcome once it comes; until then, that it is outstanding. */
function track(probe: Promise<string>): () => string {
  let outcome = 'probe outstanding';
  void probe.then((o) => (outcome = o));
  return () => outcome;
}

/**
 * A deposed leader that is slow to notice: a follower restarted with a long
 * election timeout (SLOW_QUORUM_ARGS), made leader by a transfer, then cut
 * from its peers for a TTL plus 8-12 s, less than its check-quorum takes
 * to step it down.
 * The majority elects a new leader within a few seconds. One client reaches
 * only this replica from before the transfer (so its probe session, opened
 * then, is heartbeated through it, with the ordinary TTL); the others lose
 * their links to it at the cut. After the cut that client asks for a lock
 * no one holds.
 * A correct leader confirms its leadership with a majority before it
 * extends a lease or grants, so it does neither: the client's sessions
 * expire on the majority side, the Acquire stays unanswered. With
 * heartbeatWithoutConfirmation it goes on acknowledging the client's
 * heartbeats after the new leader expired those sessions and others were
 * granted later entries (the expiry checker's broken promise); with
 * grantBeforeCommit it answers GRANTED for an entry the new leader's log
 * replaces (the grants-in-log checker).
 */
export async function slowLeaderIsolated(c: FaultContext): Promise<Started | string> {
  const { cell } = c;
  const id = await c.pickFollower();
  if (id === undefined) return 'no leader or no follower up';
  const at = cell.ids.indexOf(id);
  const withIt = c.random.pick(c.workers);
  const cutClientLinks: LinkProxy[] = [];
  const steps = stopwatch();
  await cell.kill(id);
  cell.spawn(id, { args: SLOW_QUORUM_ARGS });
  let probe = (): string => 'no probe';
  const heal = async (): Promise<string> => {
    cell.healLinks();
    for (const l of cutClientLinks) l.heal();
    if (cell.state.get(id) !== 'paused') {
      await cell.kill(id);
      cell.spawn(id);
    }
    return `healed links (peers and clients), restarted ${id} with the cell's election timeout; probe: ${probe()}`;
  };
  if (!(await until(async () => (await cell.status(id, 1_000)) !== undefined, REPLICA_START_MS)))
    return { detail: `${id} with a long election timeout did not answer within ${REPLICA_START_MS} ms`, durationMs: 0, heal };
  steps.lap('restart');
  // Before the transfer: the client settles on this replica, and its probe session gets the cell's ordinary TTL.
  cutClientLinks.push(...onlyReaches(withIt, at));
  const opened = await askProbe(withIt, 'open', PROBE_OPEN_MS);
  steps.lap('probe session');
  const moved = await transferTo(cell, id, SLOW_LEADER_START_MS);
  steps.lap('transfer');
  if (!moved.includes(`leader now ${id}`))
    return {
      detail: `${id} never became leader within ${SLOW_LEADER_START_MS} ms (${moved || 'no transfer answered'})`,
      durationMs: 0,
      heal,
    };
  await sleep(SETTLE_MS);
  cell.cutLinks(isolate(cell.ids, id).cut);
  for (const w of c.workers) {
    if (w === withIt) continue;
    w.links[at]!.setFault(REFUSED);
    cutClientLinks.push(w.links[at]!);
  }
  probe = track(askProbe(withIt, 'acquire-and-read', PROBE_ANSWER_MS));
  return {
    detail: `leader ${id} (election timeout ${SLOW_QUORUM_ELECTION_TICKS * SLOW_QUORUM_TICK_MS} ms) cut from its peers, with client ${withIt.id} on its side (probe: ${opened}; ${steps.text()})`,
    durationMs: c.ttlMs + c.random.range(8_000, 12_000),
    heal,
  };
}

/**
 * A follower that lags: every peer link into it delays by FOLLOWER_LAG_MS,
 * so it applies each entry that long after the entry committed. One client
 * reaches only this follower (its writes are forwarded to the leader); its
 * probe opens a session, takes a lock no one else uses, and reads it back at
 * once through the follower. A correct follower forwards the read (or runs a
 * ReadIndex round first), so the read shows the grant; with
 * readWithoutBarrier it answers from its own state, seconds old: no holder,
 * and a revision below the token just granted (the tokens and
 * linearizability checkers).
 */
export async function laggingFollower(c: FaultContext): Promise<Started | string> {
  const { cell } = c;
  const id = await c.pickFollower();
  if (id === undefined) return 'no leader or no follower up';
  const at = cell.ids.indexOf(id);
  const withIt = c.random.pick(c.workers);
  const inbound = cell.ids.filter((o) => o !== id).map((o) => ({ from: o, to: id }));
  cell.faultLinks(inbound, { delayMs: FOLLOWER_LAG_MS });
  const refused = onlyReaches(withIt, at);
  const probe = track(
    (async () => `${await askProbe(withIt, 'open', PROBE_ANSWER_MS)}; ${await askProbe(withIt, 'acquire-and-read', PROBE_ANSWER_MS)}`)(),
  );
  return {
    detail: `every peer link into follower ${id} delayed ${FOLLOWER_LAG_MS} ms, with client ${withIt.id} reaching only it`,
    durationMs: c.random.range(8_000, 12_000),
    heal: async () => {
      for (const l of inbound) cell.link(l).heal();
      for (const l of refused) l.heal();
      return `healed the links into ${id} and client ${withIt.id}'s; probe: ${probe()}`;
    },
  };
}

/**
 * What a run simulates. A seed plus these options fix a run exactly; the
 * defaults are "all faults on" as CI runs them. Per-bug profiles tune the
 * fault mix so each planted bug gets the conditions that expose it; the
 * checkers stay the same.
 */
import { raftTuningDefault } from '@fencer/raft';
import type { ReplicaBug } from '@fencer/replica';
import type { PlantedBug } from './planted.js';
import type { NetworkProfile } from './network.js';
import type { StoreKind } from './store.js';

/** Relative weights of the nemesis's actions (0 turns one off). */
export interface FaultMix {
  readonly partition: number;
  readonly rollingPartition: number;
  readonly crash: number;
  readonly pause: number;
  readonly drift: number;
  readonly transfer: number;
  readonly membership: number;
  readonly lossyNetwork: number;
  readonly slowDisk: number;
  /** A voter loses power right after granting a vote and restarts at once; its candidate is cut off from the rest. */
  readonly amnesia: number;
  /** The next few new leaders crash within milliseconds of their election. */
  readonly leaderInfancy: number;
  /**
   * The Raft paper's Figure 8 schedule, played with whoever holds the roles:
   * an old leader's entries reach a minority, a new leader's divergent entry
   * stays on it alone, the old entries' holder leads again and replicates
   * them, dies, and the divergent one returns. (Five or more nodes.)
   */
  readonly figure8: number;
  /**
   * A follower's connection to the live leader resets (a middlebox, a
   * refused batch): it must not depose the leader (connection-resets.ts).
   */
  readonly connectionReset: number;
}

export interface SimOptions {
  readonly seed: number;
  /** Simulated seconds in total, the quiet tail included. */
  readonly seconds: number;
  readonly replicas: number;
  /** Last seconds of the run with no faults: a leader must emerge and all members converge. */
  readonly quietSeconds: number;
  /** Bound on electing a stable leader once the faults stop. */
  readonly leaderBoundSeconds: number;
  /** Mean time between nemesis actions. */
  readonly faultEveryMs: number;
  readonly faults: FaultMix;
  /** Concurrent clients; each issues one operation at a time. */
  readonly clients: number;
  readonly clientThinkMs: number;
  readonly readShare: number;
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly heartbeatTicks: number;
  readonly snapshotEveryEntries: number;
  /** Raft's PreVote (on in production; some bug profiles turn it off, as a supported configuration). */
  readonly preVote: boolean;
  /** RaftConfig.broadcastCommit: off in production; by default on for every fourth seed, so both ways run. */
  readonly broadcastCommit: boolean;
  /** Base fsync latency (log-normal median) of every disk. */
  readonly fsyncMs: number;
  /** Most nodes down (crashed) at once. */
  readonly crashedMax: number;
  /**
   * Share of crashes that are a process dying, whose sockets the kernel
   * closes: its peers see their connections to it reset at once. The rest
   * are machines stopping dead, which only the election timer notices.
   */
  readonly crashResetShare: number;
  /** Share of crashes followed by a quick restart (20-300 ms) rather than a long one (0.3-6 s). */
  readonly restartFastShare: number;
  /** Chance that any new leader is killed young (as by leaderInfancy), all run long: the course's Figure 8 test. */
  readonly leaderChurnP: number;
  /** How long a leader killed by the leaderInfancy fault lives after its election, in ms [min, max]. */
  readonly leaderLifetimeMs: readonly [number, number];
  /** A pause lasts this long, in ms [min, max]; it hits the leader with this probability (else a random node). */
  readonly pauseMs: readonly [number, number];
  readonly pauseLeaderShare: number;
  /** Raft flow control: most entries in one AppendEntries. */
  readonly maxEntriesPerMsg: number;
  readonly bugs: Partial<Record<ReplicaBug, boolean>>;
  /** A double membership change (the second before the first commits) in the nemesis's repertoire. */
  readonly doubleConfChange: boolean;
  /** Changes to the faulty network's profile (drop, duplicate, delay tail). */
  readonly network: Partial<NetworkProfile>;
  /** 'wal': the production store over an in-memory disk; 'model': a call-level model of a store. */
  readonly store: StoreKind;
  /**
   * The replicated state machine: 'lock' is production's LockStateMachine
   * driven by the lock workload (sessions, locks, leader expiries); 'kv' a
   * toy register machine (cheaper; its reads check a version only).
   */
  readonly machine: SimMachineKind;
  /** A planted lock-level bug, to show a lock checker fires (tests only); null in every real run. */
  readonly planted: PlantedBug | null;
}

export type SimMachineKind = 'lock' | 'kv';

export const allFaults: FaultMix = {
  partition: 3,
  rollingPartition: 1,
  crash: 3,
  pause: 1,
  drift: 1,
  transfer: 1,
  membership: 1,
  lossyNetwork: 1,
  slowDisk: 1,
  amnesia: 1,
  leaderInfancy: 1,
  figure8: 1,
  connectionReset: 1,
};

/** Every weight 0: a profile names the faults it wants. */
const noFaults: FaultMix = Object.fromEntries(Object.keys(allFaults).map((k) => [k, 0])) as unknown as FaultMix;

export function defaultOptions(seed: number, overrides: Partial<SimOptions> = {}): SimOptions {
  const replicas = overrides.replicas ?? 5;
  const seconds = overrides.seconds ?? 120;
  return {
    seed,
    seconds,
    replicas,
    // A short run keeps a third of itself quiet.
    quietSeconds: Math.min(20, Math.floor(seconds / 3)),
    leaderBoundSeconds: 10,
    faultEveryMs: 2_000,
    faults: allFaults,
    // The lock workload needs a few more clients for contention on its six names.
    clients: overrides.machine === 'kv' ? 3 : 4,
    clientThinkMs: 60,
    readShare: 0.3,
    tickMs: 100,
    electionTicks: raftTuningDefault.electionTicks,
    heartbeatTicks: raftTuningDefault.heartbeatTicks,
    snapshotEveryEntries: 300,
    preVote: raftTuningDefault.preVote,
    broadcastCommit: seed % 4 === 0,
    fsyncMs: 2,
    crashedMax: Math.floor(replicas / 2) + 1,
    restartFastShare: 0.3,
    crashResetShare: 0.5,
    maxEntriesPerMsg: 64,
    leaderLifetimeMs: [1, 10],
    leaderChurnP: 0,
    pauseMs: [1_200, 4_000],
    pauseLeaderShare: 0.5,
    bugs: {},
    doubleConfChange: false,
    store: 'wal',
    machine: 'lock',
    planted: null,
    network: {},
    ...overrides,
  };
}

/** Replicas for a seed of the CI sweep: mostly five, every fifth seed three. */
export function sweepReplicas(seed: number): number {
  return seed % 5 === 0 ? 3 : 5;
}

/** The options of one seed of the CI sweep (all faults on). */
export function sweepOptions(seed: number, overrides: Partial<SimOptions> = {}): SimOptions {
  return defaultOptions(seed, { replicas: sweepReplicas(seed), ...overrides });
}

export const BUGS: readonly ReplicaBug[] = [
  'commitPreviousTermByCounting',
  'voteBeforePersist',
  'ackBeforeFsync',
  'readIndexBeforeBlankCommit',
  'concurrentConfChange',
  'acceptStaleTerm',
  'campaignWithoutPreVoteOnConnectionLoss',
];

/**
 * The run a bug test uses: the bug on, and a fault mix that gives it its
 * chance. Shorter runs than CI's safety sweep, since a caught bug ends a
 * seed's run early and an uncaught one should be rare.
 */
export function bugOptions(bug: ReplicaBug, seed: number, overrides: Partial<SimOptions> = {}): SimOptions {
  const seconds = overrides.seconds ?? 60;
  const base = { bugs: { [bug]: true }, seconds, quietSeconds: Math.min(10, Math.floor(seconds / 3)) } satisfies Partial<SimOptions>;
  switch (bug) {
    case 'ackBeforeFsync':
      // Slow fsyncs widen the window; crashes lose what was acknowledged early.
      return defaultOptions(seed, { ...base, replicas: 3, fsyncMs: 30, faults: { ...allFaults, crash: 8, membership: 0 }, ...overrides });
    case 'voteBeforePersist':
      // A voter that crashes right after voting and comes back at once, amid elections.
      return defaultOptions(seed, {
        ...base,
        replicas: 3,
        faultEveryMs: 600,
        restartFastShare: 0.9,
        faults: {
          ...allFaults,
          crash: 2,
          amnesia: 6,
          partition: 4,
          rollingPartition: 2,
          pause: 0,
          transfer: 0,
          membership: 0,
          slowDisk: 0,
        },
        ...overrides,
      });
    case 'concurrentConfChange':
      return defaultOptions(seed, { ...base, doubleConfChange: true, faults: { ...allFaults, membership: 6 }, ...overrides });
    case 'commitPreviousTermByCounting':
      // Figure 8, often; one entry per append so a follower can match an old-term entry alone.
      return defaultOptions(seed, { ...base, maxEntriesPerMsg: 1, faults: { ...allFaults, figure8: 8, membership: 0 }, ...overrides });
    case 'acceptStaleTerm':
      // A leader paused about as long as it takes the others to elect wakes up still leading and
      // sends appends of its old term to followers of the new leader.
      return defaultOptions(seed, {
        ...base,
        pauseMs: [1_000, 2_500],
        pauseLeaderShare: 1,
        faults: { ...allFaults, pause: 10, membership: 0, figure8: 0 },
        ...overrides,
      });
    case 'campaignWithoutPreVoteOnConnectionLoss':
      // Spurious resets of a follower's connection to a live leader, and nothing else to blame an election on.
      return defaultOptions(seed, { ...base, faults: { ...noFaults, connectionReset: 1 }, ...overrides });
    case 'readIndexBeforeBlankCommit':
      // Leadership moves often (transfers), clients read a lot and retry at once, and slow fsyncs keep
      // a new leader's blank entry uncommitted for a while: reads land in that window.
      return defaultOptions(seed, {
        ...base,
        readShare: 0.7,
        clientThinkMs: 5,
        fsyncMs: 15,
        faults: { ...allFaults, transfer: 8, membership: 0, figure8: 0 },
        ...overrides,
      });
    default:
      return defaultOptions(seed, { ...base, ...overrides });
  }
}

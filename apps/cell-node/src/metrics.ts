/**
 * Prometheus metrics (prom-client) for one cell node, and the adapter the
 * replica's tiny Metrics interface writes through. Served over plain HTTP
 * at /metrics.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '@fencer/service';
import type { CellMetrics } from '@fencer/cell';

export class NodeMetrics {
  readonly registry = new Registry();
  readonly leaderChanges = new Counter({
    name: 'fencer_leader_changes_total',
    help: 'Times this node saw the leader change',
    registers: [this.registry],
  });
  readonly isLeader = new Gauge({ name: 'fencer_is_leader', help: '1 when this node is the leader', registers: [this.registry] });
  readonly term = new Gauge({ name: 'fencer_raft_term', help: 'Current Raft term', registers: [this.registry] });
  readonly commitIndex = new Gauge({ name: 'fencer_raft_commit_index', help: 'Commit index', registers: [this.registry] });
  readonly appliedIndex = new Gauge({ name: 'fencer_raft_applied_index', help: 'Applied index', registers: [this.registry] });
  readonly proposals = new Counter({
    name: 'fencer_proposals_total',
    help: 'Proposals by outcome',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly commitLatency = new Histogram({
    name: 'fencer_proposal_commit_seconds',
    help: 'Time from proposal to applied result on the leader',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly readIndexLatency = new Histogram({
    name: 'fencer_read_index_seconds',
    help: 'ReadIndex latency (linearizable reads)',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly sessions = new Gauge({ name: 'fencer_sessions', help: 'Live sessions in the state machine', registers: [this.registry] });
  readonly locks = new Gauge({ name: 'fencer_locks', help: 'Live locks in the state machine', registers: [this.registry] });
  readonly waiters = new Gauge({ name: 'fencer_waiters', help: 'Queued waiters in the state machine', registers: [this.registry] });
  readonly watchers = new Gauge({ name: 'fencer_watchers', help: 'Open Watch streams on this node', registers: [this.registry] });
  readonly keepalives = new Counter({
    name: 'fencer_keepalives_total',
    help: 'Heartbeats answered',
    labelNames: ['path'],
    registers: [this.registry],
  });
  readonly expiries = new Counter({
    name: 'fencer_session_expiries_total',
    help: 'ExpireSession entries applied',
    registers: [this.registry],
  });
  readonly peerQueueDepth = new Gauge({
    name: 'fencer_peer_send_queue_depth',
    help: 'Messages queued per peer link',
    labelNames: ['peer'],
    registers: [this.registry],
  });
  readonly peerDropped = new Counter({
    name: 'fencer_peer_messages_dropped_total',
    help: 'Peer messages dropped (queue full or link down)',
    labelNames: ['peer'],
    registers: [this.registry],
  });
  readonly walFsync = new Histogram({
    name: 'fencer_wal_fsync_seconds',
    help: 'WAL fdatasync (file) and directory fsync durations',
    labelNames: ['kind'],
    buckets: [0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1],
    registers: [this.registry],
  });
  readonly rpcs = new Counter({
    name: 'fencer_rpcs_total',
    help: 'Client RPCs by method and code',
    labelNames: ['method', 'code'],
    registers: [this.registry],
  });
  readonly forwarded = new Counter({
    name: 'fencer_forwarded_calls_total',
    help: "Unary calls this follower forwarded to its leader, by transport: the leader's lane (counted when answered), or gRPC where it speaks none",
    labelNames: ['transport'],
    registers: [this.registry],
  });
  /** Replica-reported counters and histograms by name (fsync duration and batch size come from the WAL through it). */
  private readonly replicaCounters = new Counter({
    name: 'fencer_replica_events_total',
    help: 'Replica counters by name',
    labelNames: ['name'],
    registers: [this.registry],
  });
  /**
   * Peer messages refused, by reason: by the Raft core (libs/raft message-check.ts) or at the peer transport (@fencer/peer-transport StreamRefusal:
   * other-cell, undecodable, frame-too-large, not-member, unknown-type). A rising count is a bug or a hostile peer.
   */
  private readonly raftMessagesRefused = new Counter({
    name: 'fencer_raft_messages_refused_total',
    help: 'Raft messages refused unprocessed, by the core or the peer transport, by reason (malformed, wrong-to, bad-term, other-cell, undecodable, ...)',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  private readonly replicaObservations = new Histogram({
    name: 'fencer_replica_observations',
    help: 'Replica-reported observations by name (durations in ms, sizes in entries or bytes)',
    labelNames: ['name'],
    buckets: [0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000],
    registers: [this.registry],
  });

  constructor() {
    collectProcessMetrics(this.registry);
  }

  /**
   * WAL counters read at scrape time: saves (Raft readies written) and fsyncs,
   * whose ratio is the group-commit batch size.
   */
  watchWal(
    stats: () => { saves: number; fsyncs: number; batches: number },
    syncs: () => { syncsOnLoop: number; syncsInPool: number },
  ): void {
    new Gauge({
      name: 'fencer_wal_fdatasyncs',
      help: 'WAL file fdatasyncs since start, by where they ran: on the event loop, or on the thread pool (--wal-sync-on-loop)',
      labelNames: ['thread'],
      registers: [this.registry],
      collect() {
        const s = syncs();
        this.set({ thread: 'loop' }, s.syncsOnLoop);
        this.set({ thread: 'pool' }, s.syncsInPool);
      },
    });
    new Gauge({
      name: 'fencer_wal_saves',
      help: 'WAL save calls since start',
      registers: [this.registry],
      collect() {
        this.set(stats().saves);
      },
    });
    new Gauge({
      name: 'fencer_wal_fsyncs',
      help: 'WAL fsyncs since start',
      registers: [this.registry],
      collect() {
        this.set(stats().fsyncs);
      },
    });
    new Gauge({
      name: 'fencer_wal_batch_saves',
      help: 'Average saves per fsync since start (group commit batch size)',
      registers: [this.registry],
      collect() {
        const s = stats();
        this.set(s.fsyncs === 0 ? 0 : s.saves / s.fsyncs);
      },
    });
  }

  /** The replica's Metrics interface. */
  readonly replica = {
    inc: (name: string, by = 1, labels?: Readonly<Record<string, string>>): void => {
      if (name === 'replica_messages_dropped_total') this.raftMessagesRefused.inc({ reason: labels?.['reason'] ?? 'unknown' }, by);
      else this.replicaCounters.inc({ name }, by);
    },
    observe: (name: string, value: number): void => this.replicaObservations.observe({ name }, value),
  };

  /** What libs/cell reports, written to the gauges, counters and histograms above. */
  cellMetrics(): CellMetrics {
    return {
      replica: this.replica,
      proposed: (outcome, commitSeconds) => {
        this.proposals.inc({ outcome });
        if (commitSeconds !== null) this.commitLatency.observe(commitSeconds);
      },
      readConfirmed: (seconds) => this.readIndexLatency.observe(seconds),
      heartbeatsAnswered: (path, count) => this.keepalives.inc({ path }, count),
      sessionExpired: () => this.expiries.inc(),
      leaderChanged: () => this.leaderChanges.inc(),
      raftStatus: (read) => {
        const s = read();
        this.term.set(s.term);
        this.commitIndex.set(s.commit);
        this.appliedIndex.set(s.applied);
        this.isLeader.set(s.isLeader ? 1 : 0);
        this.watchers.set(s.watchers);
      },
      tableSizes: (read) => {
        const s = read();
        this.sessions.set(s.sessions);
        this.locks.set(s.locks);
        this.waiters.set(s.waiters);
      },
    };
  }
}

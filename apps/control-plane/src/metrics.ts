/** Prometheus metrics (prom-client) of one control-plane instance, served at /metrics on their own listener. */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '@fencer/service';
import type { Metrics } from '@fencer/replica';
import type { AppMetrics } from './app.js';
import type { LeaderLoopMetrics } from './workers/leader-loop.js';
import type { SnapshotMetrics } from './workers/snapshot-task.js';
import type { MoveWorkerMetrics } from './workers/move-worker.js';
import type { CellView } from './cells.js';

export class ControlPlaneMetrics implements AppMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'fencer_cp_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'fencer_cp_http_request_seconds',
    help: 'HTTP request latency by route',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60],
    registers: [this.registry],
  });
  readonly isLeader = new Gauge({
    name: 'fencer_cp_is_leader',
    help: '1 when this instance leads the meta group',
    registers: [this.registry],
  });
  readonly routingVersion = new Gauge({
    name: 'fencer_cp_routing_version',
    help: 'Routing table version applied here',
    registers: [this.registry],
  });
  readonly tenants = new Gauge({ name: 'fencer_cp_tenants', help: 'Tenants applied here', registers: [this.registry] });
  readonly dashboardStreams = new Gauge({
    name: 'fencer_cp_dashboard_streams',
    help: 'Dashboard event streams open on this instance',
    registers: [this.registry],
  });
  readonly dashboardWatches = new Gauge({
    name: 'fencer_cp_dashboard_watches',
    help: 'Tenants whose live locks this instance watches for the dashboard',
    registers: [this.registry],
  });
  private readonly replicaCounters = new Counter({
    name: 'fencer_cp_replica_events_total',
    help: 'Meta-group replica events by name',
    labelNames: ['name'] as const,
    registers: [this.registry],
  });
  private readonly replicaObservations = new Histogram({
    name: 'fencer_cp_replica_observations',
    help: 'Meta-group replica observations by name',
    labelNames: ['name'] as const,
    registers: [this.registry],
  });
  /**
   * Peer messages refused, by reason, under the cell nodes' name and labels: by the Raft core (libs/raft
   * message-check.ts) or at the peer port (@fencer/peer-transport StreamRefusal: other-cell, undecodable,
   * frame-too-large, not-member, unknown-type). A rising count is a bug or a hostile peer.
   */
  private readonly raftMessagesRefused = new Counter({
    name: 'fencer_raft_messages_refused_total',
    help: 'Raft messages refused unprocessed, by the core or the peer transport, by reason (malformed, wrong-to, bad-term, other-cell, undecodable, not-member, ...)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  private readonly snapshotNewest = new Gauge({
    name: 'fencer_cp_snapshot_last_success_timestamp_seconds',
    help: "When each cell's newest uploaded snapshot was taken (Unix seconds; set by the meta leader): alert on time() minus it",
    labelNames: ['cell'] as const,
    registers: [this.registry],
  });
  private readonly snapshotBytes = new Counter({
    name: 'fencer_cp_snapshot_upload_bytes_total',
    help: 'Bytes of cell snapshots uploaded to object storage, by cell',
    labelNames: ['cell'] as const,
    registers: [this.registry],
  });
  private readonly snapshotFailures = new Counter({
    name: 'fencer_cp_snapshot_upload_failures_total',
    help: 'Snapshot upload attempts that failed (each is retried; a record fails when every attempt did), by cell',
    labelNames: ['cell'] as const,
    registers: [this.registry],
  });
  private readonly leaderPasses = new Counter({
    name: 'fencer_cp_leader_task_passes_total',
    help: 'Passes of the leader-only tasks (moves, ownership, snapshots) by task and outcome (ok, failed, aborted)',
    labelNames: ['task', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly movesInProgress = new Gauge({
    name: 'fencer_cp_moves_in_progress',
    help: 'Tenant moves not yet done or failed (set by the meta leader)',
    registers: [this.registry],
  });
  private readonly moveOldestStateSeconds = new Gauge({
    name: 'fencer_cp_move_oldest_state_seconds',
    help: 'Seconds the longest-waiting unfinished move has been in its current state: alert when a move is stuck',
    registers: [this.registry],
  });
  private readonly moveStateSeconds = new Histogram({
    name: 'fencer_cp_move_state_seconds',
    help: 'Seconds a move spent in a state, by state, observed when it left it',
    labelNames: ['state'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  private readonly moveStepSeconds = new Histogram({
    name: 'fencer_cp_move_step_seconds',
    help: 'Seconds one step of a move took (a cell call such as freeze-source or copy, or a journal write), by step and outcome (ok, failed)',
    labelNames: ['step', 'outcome'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 20],
    registers: [this.registry],
  });
  private readonly moveUnavailableSeconds = new Histogram({
    name: 'fencer_cp_move_unavailable_seconds',
    help: "Per finished move: time its namespace refused writes, from the freeze to the target's first write",
    buckets: [0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30],
    registers: [this.registry],
  });
  private readonly ownershipClaims = new Counter({
    name: 'fencer_cp_ownership_claims_total',
    help: 'Namespaces the ownership reconciler claimed on a cell that lacked them, by cell',
    labelNames: ['cell'] as const,
    registers: [this.registry],
  });
  private readonly quotaPushes = new Counter({
    name: 'fencer_cp_ownership_quota_pushes_total',
    help: 'Tenant quotas the ownership reconciler sent to a cell that reported other values, by cell',
    labelNames: ['cell'] as const,
    registers: [this.registry],
  });

  private readonly credentialPushes = new Counter({
    name: 'fencer_cp_ownership_credential_pushes_total',
    help: 'Tenant token hashes the ownership reconciler sent to a cell that reported others, by cell',
    labelNames: ['cell'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectProcessMetrics(this.registry);
  }

  readonly snapshots: SnapshotMetrics = {
    uploaded: (cell, bytes) => this.snapshotBytes.inc({ cell }, bytes),
    uploadFailed: (cell) => this.snapshotFailures.inc({ cell }),
    newestDone: (cell, atMs) => this.snapshotNewest.set({ cell }, atMs / 1000),
  };

  readonly leaderLoop: LeaderLoopMetrics = {
    passEnded: (task, outcome) => this.leaderPasses.inc({ task, outcome }),
  };

  readonly moves: MoveWorkerMetrics = {
    moveAdvanced: (_state, previous, seconds) => this.moveStateSeconds.observe({ state: previous }, seconds),
    moveUnavailable: (seconds) => this.moveUnavailableSeconds.observe(seconds),
    moveStep: (step, seconds, ok) => this.moveStepSeconds.observe({ step, outcome: ok ? 'ok' : 'failed' }, seconds),
    movesInProgress: (count, oldest) => {
      this.movesInProgress.set(count);
      this.moveOldestStateSeconds.set(oldest);
    },
  };

  ownershipClaimed(cell: string): void {
    this.ownershipClaims.inc({ cell });
  }

  ownershipCredentialsSent(cell: string): void {
    this.credentialPushes.inc({ cell });
  }

  ownershipQuotasSent(cell: string): void {
    this.quotaPushes.inc({ cell });
  }

  /** The replica's tiny Metrics interface, written through to prom-client. */
  readonly replica: Metrics = {
    inc: (name, by = 1, labels) => {
      if (name === 'replica_messages_dropped_total') this.raftMessagesRefused.inc({ reason: labels?.['reason'] ?? 'unknown' }, by);
      else this.replicaCounters.inc({ name }, by);
    },
    observe: (name, value) => this.replicaObservations.observe({ name }, value),
  };

  /** Counts a message the peer port refused before the core saw it (the peer server's onRefused). */
  peerRefused(reason: string): void {
    this.raftMessagesRefused.inc({ reason });
  }

  /**
   * The cells' replicas as this instance's Status polls see them (GET /v1/fleet's view), read at scrape time:
   * how many of each cell's replicas did not answer the last poll, and, per replica, seconds since its last answer.
   */
  watchCells(status: () => readonly CellView[]): void {
    new Gauge({
      name: 'fencer_cp_cell_replicas_unreachable',
      help: "Replicas of each cell that did not answer this instance's last admin Status poll (GET /v1/fleet: unreachable)",
      labelNames: ['cell'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const c of status()) this.set({ cell: c.id }, c.replicas.filter((r) => r.role === 'unreachable').length);
      },
    });
    new Gauge({
      name: 'fencer_cp_cell_replica_last_seen_seconds',
      help: "Seconds since each replica last answered this instance's admin Status poll (GET /v1/fleet: lastSeenMs); absent before its first answer",
      labelNames: ['cell', 'replica'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const c of status())
          for (const r of c.replicas) if (r.lastSeenMs !== undefined) this.set({ cell: c.id, replica: r.id }, r.lastSeenMs / 1000);
      },
    });
  }

  /** The meta group's Raft term, read at scrape time: an election, real or forced by a forged message, moves it. */
  watchTerm(term: () => number): void {
    new Gauge({
      name: 'fencer_cp_raft_term',
      help: "The meta group's current Raft term on this instance",
      registers: [this.registry],
      collect() {
        this.set(term());
      },
    });
  }
}

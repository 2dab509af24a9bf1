/**
 * Goal: the control plane's metrics of the cells it polls say what GET
 * /v1/fleet says: fencer_cp_cell_replicas_unreachable counts each cell's
 * unreachable replicas, fencer_cp_cell_replica_last_seen_seconds gives each
 * replica's time since its last answer (absent before any), both read at
 * scrape time so they follow the polls.
 * Method: ControlPlaneMetrics.watchCells over a view the test changes
 * between two scrapes of the registry.
 */
import { describe, expect, it } from 'vitest';
import { ControlPlaneMetrics, type CellView } from '../src/index.js';

describe('ControlPlaneMetrics.watchCells', () => {
  it('counts unreachable replicas per cell and exports last-seen ages, at scrape time', async () => {
    const metrics = new ControlPlaneMetrics();
    let views: CellView[] = [
      {
        id: 'cell-1',
        leader: 'cell-1-r1',
        sessions: 0,
        leaderChangesLastHour: 0,
        replicas: [
          { id: 'cell-1-r1', grpc: 'a:1', role: 'leader', lastSeenMs: 500 },
          { id: 'cell-1-r2', grpc: 'a:2', role: 'unreachable', lastSeenMs: 42_000 },
          { id: 'cell-1-r3', grpc: 'a:3', role: 'unreachable' },
        ],
      },
      {
        id: 'cell-2',
        leader: 'cell-2-r1',
        sessions: 0,
        leaderChangesLastHour: 0,
        replicas: [{ id: 'cell-2-r1', grpc: 'b:1', role: 'leader', lastSeenMs: 0 }],
      },
    ];
    metrics.watchCells(() => views);
    const first = await metrics.registry.metrics();
    expect(first).toContain('fencer_cp_cell_replicas_unreachable{cell="cell-1"} 2');
    expect(first).toContain('fencer_cp_cell_replicas_unreachable{cell="cell-2"} 0');
    expect(first).toContain('fencer_cp_cell_replica_last_seen_seconds{cell="cell-1",replica="cell-1-r2"} 42');
    expect(first).not.toContain('replica="cell-1-r3"');
    views = [{ ...views[1]!, replicas: [{ id: 'cell-2-r1', grpc: 'b:1', role: 'unreachable', lastSeenMs: 9_000 }] }];
    const second = await metrics.registry.metrics();
    expect(second).toContain('fencer_cp_cell_replicas_unreachable{cell="cell-2"} 1');
    expect(second).not.toContain('cell="cell-1"');
  });
});

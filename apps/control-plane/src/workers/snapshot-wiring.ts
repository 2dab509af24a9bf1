/**
 * The snapshot task as main.ts starts it: the object store from
 * --snapshot-store (and the --s3-* flags), the cells' admin APIs as the
 * source, the schedule and retention from the flags.
 */
import { randomUUID } from 'node:crypto';
import type { ChannelCredentials } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { openObjectStore } from '@fencer/object-store';
import type { CellDirectory } from '../cells.js';
import type { ControlPlaneConfig } from '../config.js';
import type { MetaStore } from '../meta-group.js';
import { GrpcSnapshotSource } from './snapshot-source.js';
import { SnapshotTask, type SnapshotMetrics } from './snapshot-task.js';

export interface SnapshotWiring {
  readonly task: SnapshotTask;
  close(): void;
}

export function startSnapshotTask(
  config: ControlPlaneConfig,
  deps: { meta: MetaStore; cells: CellDirectory; logger: Logger; metrics: SnapshotMetrics; cellCredentials?: ChannelCredentials },
): SnapshotWiring {
  const store = openObjectStore(config.snapshotStore, config.s3);
  const source = new GrpcSnapshotSource(config.cells, deps.cells, deps.cellCredentials);
  const task = new SnapshotTask({
    meta: deps.meta,
    cellIds: () => deps.cells.cellIds(),
    source,
    store,
    schedule: config.snapshotSchedule,
    wallMs: () => Date.now(),
    newId: () => randomUUID(),
    logger: deps.logger,
    metrics: deps.metrics,
  });
  return {
    task,
    close: () => {
      source.close();
      store.close();
    },
  };
}

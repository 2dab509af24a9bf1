/**
 * Goal: every call of the contract behaves as lockservice.proto and
 * docs/architecture.md ("Promises") say, against a real five-replica cell.
 * Method: five cell-node processes on 127.0.0.1; calls go to a follower
 * first (so forwarding is exercised) through a small retrying test client.
 * The cases live in @fencer/fleet/contract, shared with the router's tests.
 */
import { afterAll, beforeAll } from 'vitest';
import { contractSuite } from '@fencer/fleet/contract';
import { type Cell, startCell } from './support/cell.js';

let cell: Cell;
beforeAll(async () => {
  cell = await startCell({ extraArgs: ['--watch-history-max', '200', '--watch-progress-ms', '1000'] });
});
afterAll(async () => {
  await cell?.stop();
});

const addressOf = (id: string): string => cell.replicas.find((r) => r.id === id)!.grpc;
contractSuite({
  kind: 'cell',
  target: () => ({
    client: cell.client,
    cell,
    leaderAddress: async () => addressOf((await cell.leader()).nodeId),
    followerAddress: async () => {
      const leader = (await cell.leader()).nodeId;
      return cell.replicas.find((r) => r.id !== leader)!.grpc;
    },
    keepAliveAddresses: () => cell.endpoints,
    anyAddress: () => cell.replicas[0]!.grpc,
    leaderMetrics: async () => {
      const leader = (await cell.leader()).nodeId;
      return cell.replicas.find((r) => r.id === leader)!.metrics;
    },
  }),
});

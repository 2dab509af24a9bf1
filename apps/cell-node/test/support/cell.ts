/**
 * Test support: a real cell of cell-node processes on 127.0.0.1, and a small
 * client that follows leader hints and retries UNAVAILABLE with the same
 * request (what the client library does, kept minimal so these tests check
 * the server alone).
 */
import { adminClient } from '@fencer/fleet';
import { startTestCell, type TestCell } from '@fencer/fleet/testing';
import { TestClient } from '@fencer/fleet/contract';

export interface Cell extends TestCell {
  client: TestClient;
}

/** A real cell (tools/fleet/test-cell.mjs) plus a retrying test client over its replicas. */
export async function startCell(opts: { replicas?: number; extraArgs?: string[] } = {}): Promise<Cell> {
  const cell = await startTestCell(opts);
  const client = new TestClient(cell.endpoints);
  const stop = cell.stop;
  return Object.assign(cell, {
    client,
    stop: async () => {
      client.close();
      await stop();
    },
  });
}

export { TestClient, eventually } from '@fencer/fleet/contract';

export { adminClient };

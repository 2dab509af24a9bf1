/**
 * Goal: buildCellNode(deps) is the whole node without a process around it:
 * a one-replica cell built in this test process elects itself, serves the
 * lock service on its client port (and not the Raft peer service), and
 * close() stops every socket and timer it started.
 * Method: buildCellNode on free 127.0.0.1 ports with a temporary data
 * directory, gRPC clients against it, then close() and a check that the
 * client port refuses connections.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { Metadata, type ServiceError, credentials, status } from '@grpc/grpc-js';
import { SeededRandom } from '@fencer/base';
import { lockservice, raftpb } from '@fencer/protocol';
import { pino } from 'pino';
import { freePortBase } from '@fencer/fleet/testing';
import { buildCellNode } from '../src/build.js';
import { parseConfig } from '../src/config.js';
import { eventually } from './support/cell.js';
import { NodeMetrics } from '../src/metrics.js';

const dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-build-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function openSession(address: string): Promise<lockservice.OpenSessionResponse> {
  const client = new lockservice.LockServiceClient(address, credentials.createInsecure());
  return new Promise<lockservice.OpenSessionResponse>((resolve, reject) =>
    client.openSession(
      { namespace: 'built', clientId: 't', ttlMs: 5_000 },
      new Metadata(),
      { deadline: Date.now() + 10_000 },
      (err, res) => (err ? reject(err) : resolve(res)),
    ),
  ).finally(() => client.close());
}

describe('buildCellNode', () => {
  it('serves a one-replica cell in this process, and close() stops it', async () => {
    const base = await freePortBase(1);
    const port = base + 1;
    const config = parseConfig(
      [
        '--id',
        'b1',
        '--peers',
        `b1=127.0.0.1:${port}`,
        // Its own block's ports, never the defaults (7001, peer 7301), which a fleet started beside the tests holds.
        '--listen',
        `127.0.0.1:${port}`,
        '--admin-listen',
        `127.0.0.1:${port + 100}`,
        '--metrics-listen',
        `127.0.0.1:${port + 200}`,
        '--data-dir',
        dataDir,
      ],
      {},
    );
    const app = await buildCellNode({
      config,
      clock: { monoMs: () => performance.now(), wallMs: () => Date.now() },
      random: new SeededRandom(1),
      logger: pino({ level: 'silent' }),
      metrics: new NodeMetrics(),
      onFatal: (err) => {
        throw err;
      },
      nowMs: () => performance.now(),
    });
    try {
      await eventually(() => (app.node.isLeader ? true : undefined), 10_000, 'the one replica to elect itself');
      const opened = await openSession(config.listen);
      expect(opened.sessionId.startsWith('built:')).toBe(true);
      const raft = new raftpb.RaftTransportClient(config.listen, credentials.createInsecure());
      const code = await new Promise<number>((resolve) => {
        const stream = raft.send();
        stream.on('error', (e: ServiceError) => resolve(e.code));
        stream.on('data', () => {});
        stream.write({ senderAddress: '', cellId: config.cellId, messages: [] });
      });
      raft.close();
      expect(code).toBe(status.UNIMPLEMENTED);
    } finally {
      await app.close();
    }
    const after = await openSession(config.listen).then(
      () => 'answered',
      (e: ServiceError) => e.code,
    );
    expect(after).toBe(status.UNAVAILABLE);
  });
});

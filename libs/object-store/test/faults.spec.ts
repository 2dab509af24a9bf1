/**
 * Goal: with 20% or more of the requests to S3 failing (5xx answers, reset
 * connections that cut a part in the middle, requests never answered, slow
 * bodies), uploads retry and mostly succeed, and no manifest is ever
 * written for a partial snapshot: every snapshot that lists (has a
 * manifest) fetches back whole and matches it, and every publish that
 * failed left no manifest.
 * Method: s3rver behind the fault proxy (@fencer/object-store/testing) at a
 * 25% fault share with a fixed seed, multipart uploads of several parts
 * (5 MiB parts) and a short request timeout; then at 60% with two attempts
 * per request, so that publishes fail part-way too. Afterwards a store that bypasses the proxy
 * checks every manifest against its object, and the publishes that threw
 * against the listing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fetchSnapshot,
  listSnapshots,
  manifestKeyOf,
  publishSnapshot,
  snapshotKey,
  type ObjectStore,
  type SnapshotInfo,
} from '../src/index.js';
import { startFaultProxy, startS3rver, type FaultProxy, type S3rverProcess } from '../src/testing.js';

const SEED = 20_260_101;
const SNAPSHOT_BYTES = 12 * 1024 * 1024;
const PUBLISHES = 6;

let dir = '';
let s3: S3rverProcess;
let proxy: FaultProxy;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-s3-faults-'));
  s3 = await startS3rver(path.join(dir, 's3rver'));
  proxy = await startFaultProxy(s3.endpoint, {
    failShare: 0.25,
    faults: ['status-500', 'status-503', 'reset', 'stall', 'slow-body'],
    seed: SEED,
    slowChunkDelayMs: 5,
  });
}, 60_000);
afterAll(async () => {
  await proxy?.close();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function generated(bytes: number, seed: number): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= bytes) return void this.push(null);
      const n = Math.min(1024 * 1024, bytes - sent);
      const chunk = Buffer.alloc(n, (seed + sent / 1024) & 0xff);
      sent += n;
      this.push(chunk);
    },
  });
}

describe(`uploads through a proxy failing 25% of requests (seed ${SEED})`, () => {
  it('never lists a partial snapshot; retried uploads succeed', async () => {
    const outcomes: { index: number; ok: boolean; error?: string }[] = [];
    // At 25% the SDK's retries carry most publishes through; at 60% with two attempts most fail part-way.
    for (const [share, maxAttempts, first] of [
      [0.25, 3, 1],
      [0.6, 2, 101],
    ] as const) {
      proxy.setFailShare(share);
      const flaky = s3.store('faulty', { endpoint: proxy.endpoint, maxAttempts, requestTimeoutMs: 2_000, partBytes: 5 * 1024 * 1024 });
      await publishAll(flaky, first, outcomes);
      flaky.close();
    }
    const faults = Object.values(proxy.counts.faults).reduce((a, b) => a + b, 0);
    console.log(`faults injected: ${JSON.stringify(proxy.counts)}; outcomes: ${JSON.stringify(outcomes)}`);
    expect(faults / proxy.counts.requests).toBeGreaterThanOrEqual(0.2);
    expect(outcomes.filter((o) => o.index < 100 && o.ok).length).toBeGreaterThan(PUBLISHES / 2);
    expect(outcomes.filter((o) => !o.ok).length).toBeGreaterThan(0);

    const direct = s3.store('faulty');
    const listed = await listSnapshots(direct, 'cell-1');
    for (const m of listed) {
      const bytes = await fetchSnapshot(direct, manifestKeyOf(snapshotKey('cell-1', m.index, m.term)), m);
      expect(bytes.length).toBe(SNAPSHOT_BYTES);
    }
    expect(listed.map((m) => m.index).sort((a, b) => a - b)).toEqual(outcomes.filter((o) => o.ok).map((o) => o.index));
    direct.close();
  }, 600_000);
});

async function publishAll(store: ObjectStore, first: number, outcomes: { index: number; ok: boolean; error?: string }[]): Promise<void> {
  for (let index = first; index < first + PUBLISHES; index++) {
    const info: SnapshotInfo = {
      cell: 'cell-1',
      index,
      term: 1,
      voters: ['r1'],
      learners: [],
      revisionBase: 0,
      lastRevision: index,
      bytes: SNAPSHOT_BYTES,
    };
    try {
      await publishSnapshot(store, info, generated(SNAPSHOT_BYTES, index), 0);
      outcomes.push({ index, ok: true });
    } catch (err) {
      outcomes.push({ index, ok: false, error: (err as Error).message.slice(0, 200) });
    }
  }
}

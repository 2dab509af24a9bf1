/**
 * Goal: a 100 MB snapshot uploads to S3 in multipart with bounded memory:
 * the uploading process's RSS grows by less than 64 MiB while it streams
 * the snapshot, reads it back to check it, and writes its manifest.
 * Method: the upload runs in a child process of its own
 * (test/fixtures/upload-100mb.mjs over the built library), so the test
 * runner's memory does not count; it samples its RSS every 10 ms and
 * prints the baseline and the peak. Its requests go to s3rver through the
 * fault proxy with no faults, which counts the part uploads (PUTs with a
 * partNumber) so the test sees the upload was multipart.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchSnapshot, listSnapshots, manifestKeyOf, s3Defaults, snapshotKey } from '../src/index.js';
import { startFaultProxy, startS3rver, type FaultProxy, type S3rverProcess } from '../src/testing.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const SNAPSHOT_BYTES = 100 * 1000 * 1000;
const MiB = 1024 * 1024;

let dir = '';
let s3: S3rverProcess;
let proxy: FaultProxy;

beforeAll(async () => {
  execFileSync(path.join(here, '../../../node_modules/.bin/tsc'), ['-b', path.join(here, '../tsconfig.lib.json')], { stdio: 'pipe' });
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-s3-memory-'));
  s3 = await startS3rver(path.join(dir, 's3rver'));
  proxy = await startFaultProxy(s3.endpoint, { failShare: 0, faults: [], seed: 1, recordRequests: true });
}, 120_000);
afterAll(async () => {
  await proxy?.close();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function upload(): Promise<{ baselineRss: number; peakRss: number; location: string; sha256: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [path.join(here, 'fixtures/upload-100mb.mjs'), proxy.endpoint, s3.bucket, String(SNAPSHOT_BYTES)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`upload child exited ${code}: ${err}`))));
  });
}

describe('a 100 MB snapshot', () => {
  it('uploads in multipart while the uploading process grows by less than 64 MiB', async () => {
    const r = await upload();
    const growth = r.peakRss - r.baselineRss;
    const parts = proxy.requests.filter((line) => line.startsWith('PUT ') && /[?&]partNumber=\d+/.test(line)).length;
    console.log(
      `RSS ${(r.baselineRss / MiB).toFixed(1)} MiB -> peak ${(r.peakRss / MiB).toFixed(1)} MiB (+${(growth / MiB).toFixed(1)} MiB); ${parts} parts`,
    );
    expect(parts).toBeGreaterThanOrEqual(Math.ceil(SNAPSHOT_BYTES / s3Defaults.partBytes));
    expect(growth).toBeLessThan(64 * MiB);
    const store = s3.store('memory');
    const [manifest] = await listSnapshots(store, 'cell-1');
    expect(manifest).toMatchObject({ index: 100, bytes: SNAPSHOT_BYTES, sha256: r.sha256 });
    expect((await fetchSnapshot(store, manifestKeyOf(snapshotKey('cell-1', 100, 2)), manifest!)).length).toBe(SNAPSHOT_BYTES);
    store.close();
  }, 300_000);
});

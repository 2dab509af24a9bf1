/**
 * Goal: the same 120 s run while replicas snapshot and compact their logs
 * every 2,000 entries, so that restarted and paused followers catch up by
 * InstallSnapshot under faults. Every checker runs; the log check covers the
 * grants above the oldest retained entry and counts the rest.
 * Method: runChaos with a fresh seed and --snapshot-every-entries 2000.
 */
import { describe, it } from 'vitest';
import { runChaos } from '../src/run.js';
import { chaosSeed, expectCleanRun } from './support/chaos-run.js';

describe('chaos, with snapshots', () => {
  it('120 s under the full nemesis with snapshots every 2,000 entries: floors reached, no violation', async () => {
    const report = await runChaos({ seconds: 120, seed: chaosSeed(1), snapshotEveryEntries: 2_000, log: (l) => console.log(l) });
    expectCleanRun(report);
  }, 480_000);
});

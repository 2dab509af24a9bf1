/**
 * Goal (1): a 120 s run of the full nemesis while replicas snapshot and
 * compact their logs every 2,000 entries, so restarted and paused followers
 * catch up by InstallSnapshot under faults; every checker runs, the log check
 * covers the grants above the oldest retained entry and counts the rest.
 * Goal (2), the negative control: the checkers are not vacuous. The same
 * fenced-counter workload against a resource that accepts every token, under
 * client pauses longer than the session TTL, must be flagged (lost updates,
 * accepted tokens going down) while the lock service itself stays clean; and
 * the recorded history of that run, tampered with the way a broken lock
 * service would answer (two grants' tokens swapped, a read showing a holder
 * that never held), must be flagged by the token and linearizability
 * checkers, while the untouched history passes them.
 * Method: runChaos with a fresh seed each (printed; FENCER_CHAOS_SEED fixes
 * them). The control runs after the 120 s run in this file, so that it never
 * shares the machine with two 120 s runs; its nemesis only pauses client
 * processes (TTL 3 s, pauses of 3.5-6 s, one every 6-8 s), with contention on
 * two counters; then the checkers run on copies of its history.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadHistory, type History, type Op } from '../src/history.js';
import { runChaos, summarize } from '../src/run.js';
import { buildLockHistories } from '../src/check/lock-history.js';
import { checkLock } from '../src/check/linearizability.js';
import { checkTokens } from '../src/check/tokens.js';
import { chaosSeed, expectCleanRun } from './support/chaos-run.js';

describe('chaos, with snapshots', () => {
  it('120 s under the full nemesis with snapshots every 2,000 entries: floors reached, no violation', async () => {
    const report = await runChaos({ seconds: 120, seed: chaosSeed(1), snapshotEveryEntries: 2_000, log: (l) => console.log(l) });
    expectCleanRun(report);
  }, 480_000);
});

function lockViolations(h: History, name: string): boolean {
  const lh = buildLockHistories(h);
  return !checkLock(name, lh.byName.get(name) ?? [], lh.expectations, 200_000).ok;
}

function withOps(h: History, replace: Map<Op, Op>): History {
  return { ...h, ops: h.ops.map((o) => replace.get(o) ?? o) };
}

describe('negative control', () => {
  it('an unfenced resource under client pauses is flagged; tampered lock-service answers are flagged', async () => {
    const report = await runChaos({
      seconds: 45,
      seed: chaosSeed(2),
      fence: false,
      nemesis: 'client-pauses',
      workers: 3,
      lockLoops: 1,
      counterLoops: 3,
      churnLoops: 0,
      watchLoops: 0,
      counterNames: 2,
      counterWorkMs: [200, 500],
      nemesisIntervalMs: [6_000, 8_000],
      log: (l) => console.log(l),
    });
    console.log(summarize(report));
    // (1) Flagged at the resource, and only there.
    expect(report.figures.faultsByKind['pause-client'] ?? 0).toBeGreaterThanOrEqual(3);
    expect(report.violations.resource?.length ?? 0, 'the unfenced resource was not flagged').toBeGreaterThan(0);
    expect(Object.keys(report.violations)).toEqual(['resource']);
    expect(report.checkerTimedOut).toBe(false);

    // (2) The same history, tampered.
    const h = loadHistory(report.historyDir);
    const grants = h.ops.filter(
      (o) => o.op.f === 'acquire' && o.op.mode === 'X' && o.op.wait === 0 && o.r?.f === 'acquire' && o.r.status === 'GRANTED',
    );
    expect(checkTokens(h).violationCount).toBe(0);
    // Two exclusive grants of one name, the first answered before the second was asked: swap their tokens.
    let swapped: { name: string; mutated: History } | undefined;
    for (let i = 0; i < grants.length && !swapped; i++) {
      for (let j = i + 1; j < grants.length && !swapped; j++) {
        const a = grants[i]!;
        const b = grants[j]!;
        if (a.op.f !== 'acquire' || b.op.f !== 'acquire' || a.op.name !== b.op.name || a.op.s === b.op.s || a.comp >= b.inv) continue;
        if (a.r?.f !== 'acquire' || b.r?.f !== 'acquire') continue;
        const mutated = withOps(
          h,
          new Map([
            [a, { ...a, r: { ...a.r, token: b.r.token, rev: b.r.rev } }],
            [b, { ...b, r: { ...b.r, token: a.r.token, rev: a.r.rev } }],
          ]),
        );
        swapped = { name: a.op.name, mutated };
      }
    }
    expect(swapped, 'two sequential exclusive try-lock grants of one name').toBeDefined();
    expect(lockViolations(h, swapped!.name)).toBe(false);
    expect(checkTokens(swapped!.mutated).violationCount).toBeGreaterThan(0);
    expect(lockViolations(swapped!.mutated, swapped!.name)).toBe(true);
    // A read that shows a holder which never held the lock.
    const read = h.ops.find((o) => o.op.f === 'get' && o.r?.f === 'get' && o.r.holders.length > 0);
    expect(read, 'a read that saw a holder').toBeDefined();
    if (read?.r?.f !== 'get' || read.op.f !== 'get') throw new Error('unreachable');
    const ghost = {
      ...read,
      r: { ...read.r, holders: [['ghost:0', read.r.holders[0]![1], read.r.holders[0]![2]] as const, ...read.r.holders.slice(1)] },
    };
    expect(lockViolations(h, read.op.name)).toBe(false);
    expect(lockViolations(withOps(h, new Map([[read, ghost]])), read.op.name)).toBe(true);
    rmSync(report.workDir, { recursive: true, force: true });
  }, 300_000);
});

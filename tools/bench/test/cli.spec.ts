// Goal: the one entry declares every suite and its options as documented,
// and --quick presets apply only to options the user did not give.
// Method: build the commander program, read its help, and parse argument
// lists with each suite's action replaced by one that records the resolved
// options (no suite runs, nothing starts).
import { describe, expect, it } from 'vitest';
import type { Command } from 'commander';
import { buildProgram } from '../src/cli.mjs';
import { resolve } from '../src/options.mjs';
import { selectScenarios } from '../src/suites/cell.mjs';
import { PAGE_SUITES, suiteArgs } from '../src/suites/page.mjs';
import { DOC } from '../src/report.mjs';
import { readFileSync } from 'node:fs';

const SUITES = ['page', 'cell', 'fleet', 'failover', 'wal', 'lock-fsm', 'duties', 'profile', 'efficiency', 'fleet-load', 'scaling'];

/** Parses `args` as `node run.mjs ...args`; resolves with the suite run and its resolved options. */
async function parse(args: string[]): Promise<{ suite: string; opts: Record<string, unknown> }> {
  const program = buildProgram();
  let seen: { suite: string; opts: Record<string, unknown> } | undefined;
  for (const cmd of program.commands as Command[]) cmd.action(() => void (seen = { suite: cmd.name(), opts: resolve(cmd) }));
  await program.parseAsync(['node', 'run.mjs', ...args]);
  if (!seen) throw new Error(`no suite ran for ${args.join(' ')}`);
  return seen;
}

describe('the benchmark entry', () => {
  it('lists every suite, and every suite option, in --help', () => {
    const help = buildProgram().helpInformation();
    for (const s of SUITES) expect(help).toContain(s);
    const full = buildProgram();
    let text = '';
    full.configureOutput({ writeOut: (s) => void (text += s) });
    full.outputHelp();
    for (const flag of ['--systems', '--scenarios', '--via-follower', '--only', '--syncs', '--entries', '--sessions', '--top'])
      expect(text).toContain(flag);
  });

  it('runs the page by default: every suite that writes the docs, the summary suites first', async () => {
    const { suite, opts } = await parse([]);
    expect(suite).toBe('page');
    expect(opts.suites).toEqual(PAGE_SUITES);
    expect(PAGE_SUITES.slice(0, 3)).toEqual(['efficiency', 'fleet-load', 'scaling']);
    expect(suiteArgs('duties', { quick: true, write: false })).toEqual(['duties', '--no-write']);
    expect(suiteArgs('scaling', { quick: true, write: true })).toEqual(['scaling', '--quick']);
  });

  it('reproduces the whole page: every section of docs/benchmarks.md is written by a suite the page runs', () => {
    const sections = [...readFileSync(DOC, 'utf8').matchAll(/<!-- ([a-z0-9-]+):start -->/g)].map((m) => m[1]);
    // The summary's rows come from every suite, the charts from efficiency.
    const bySuite = sections.filter((s) => !s.endsWith('-notes') && s !== 'summary' && s !== 'charts');
    expect(bySuite.length).toBeGreaterThan(5);
    expect(bySuite.filter((s) => !PAGE_SUITES.includes(s))).toEqual([]);
    expect(PAGE_SUITES).toContain('efficiency');
  });

  it('runs the cell suite with its defaults', async () => {
    const { suite, opts } = await parse(['cell']);
    expect(suite).toBe('cell');
    expect(opts).toMatchObject({ seconds: 8, warmup: 1, systemWarmup: 15, rounds: 1, systems: ['fencer', 'etcd5'], write: true });
  });

  it('runs the efficiency suite through routers beside ZooKeeper-3 and etcd-5 at 1, 16 and 64 clients', async () => {
    expect((await parse(['efficiency'])).opts).toMatchObject({
      systems: ['fencer', 'zk3', 'etcd5'],
      clients: ['1', '16', '64'],
      replicas: 3,
    });
    expect((await parse(['fleet-load'])).opts).toMatchObject({ cells: 8, replicas: 5, sessions: 50_000, tenants: 16 });
    expect((await parse(['scaling'])).opts).toMatchObject({ cells: ['1', '2', '4'], clients: 64 });
  });

  it('applies --quick presets to options not given, and never over a given one', async () => {
    expect((await parse(['cell', '--quick'])).opts).toMatchObject({ seconds: 3, warmup: 0.5, systemWarmup: 3 });
    expect((await parse(['cell', '--quick', '--seconds', '5'])).opts).toMatchObject({ seconds: 5, warmup: 0.5 });
    expect((await parse(['fleet', '--quick'])).opts).toMatchObject({ replicas: 3, sessions: 2000, streams: 8, rounds: 1 });
  });

  it('runs the failover suite with 20 kills of the leader on Fencer (defaults, and a 700 ms election timeout), etcd-5 and ZooKeeper-3 by default', async () => {
    expect((await parse(['failover'])).opts).toMatchObject({
      kills: 20,
      freezes: 10,
      clients: 4,
      systems: ['fencer', 'fencer-fast', 'etcd5', 'zk3'],
    });
    expect((await parse(['failover', '--quick', '--systems', 'fencer'])).opts).toMatchObject({ kills: 3, freezes: 2, systems: ['fencer'] });
  });

  it('takes --baseline, --json and --no-write alike in every measuring suite', async () => {
    for (const suite of ['cell', 'fleet', 'lock-fsm', 'duties']) {
      const { opts } = await parse([suite, '--baseline', '/tmp/before', '--json', '/tmp/x.json', '--no-write']);
      expect(opts).toMatchObject({ baseline: '/tmp/before', json: '/tmp/x.json', write: false });
    }
  });

  it('parses lists and refuses a count that is not one', async () => {
    expect((await parse(['fleet', '--only', 'overhead'])).opts.only).toEqual(['overhead']);
    const program = buildProgram().exitOverride();
    for (const c of program.commands as Command[]) c.exitOverride().configureOutput({ writeErr: () => {} });
    await expect(program.parseAsync(['node', 'run.mjs', 'cell', '--rounds', '1.5'])).rejects.toThrow(/whole number/);
  });

  it('selects scenarios by key or family prefix', () => {
    expect(selectScenarios(['uncontended'])).toEqual(['uncontended-1', 'uncontended-16', 'uncontended-64', 'uncontended-256']);
    expect(selectScenarios(['keepalive'])).toEqual(['keepalive-10000', 'keepalive-batched-10000']);
    expect(selectScenarios(['all'])).toHaveLength(11);
    expect(() => selectScenarios(['nothing'])).toThrow(/no scenario matches/);
  });
});

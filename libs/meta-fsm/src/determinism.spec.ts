/**
 * Goal: the meta state machine stays pure, so every instance of the meta
 * group (and the simulator) computes the same state from the same log.
 * Method: scan every non-spec source file for clocks, timers, unseeded
 * randomness, node: modules and imports other than @fencer/base (the group
 * entry, src/group: other than the pure group libraries); plant a
 * forbidden token in a copy to show the scan can fail. Then apply one
 * history twice and compare snapshots byte for byte.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { findForbiddenTokens, findForeignImports } from '@fencer/base';
import { MetaStateMachine, type MetaEntry } from './index.js';

const srcDir = dirname(fileURLToPath(import.meta.url));
const sources = readdirSync(srcDir)
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
  .map((f) => ({ file: f, text: readFileSync(join(srcDir, f), 'utf8') }));
/** The state machine sees the pure foundations and the contract (its routes are the contract's routing-table entries). */
const allowed = ['@fencer/base', '@fencer/contract'];
// The group entry (src/group) composes the state machine with the pure group libraries, and nothing else.
const groupDir = join(srcDir, 'group');
const groupSources = readdirSync(groupDir)
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
  .map((f) => ({ file: `group/${f}`, text: readFileSync(join(groupDir, f), 'utf8') }));
const groupAllowed = ['@fencer/base', '@fencer/contract', '@fencer/group', '@fencer/replica', '@fencer/wal'];

describe('libs/meta-fsm purity', () => {
  it('has sources to scan', () => {
    expect(sources.map((s) => s.file)).toContain('state-machine.ts');
  });

  it.each(sources.map((s) => [s.file, s.text] as const))('%s uses no clock, timer, unseeded randomness or node: module', (_file, text) => {
    expect(findForbiddenTokens(text)).toEqual([]);
  });

  it.each(sources.map((s) => [s.file, s.text] as const))('%s imports only @fencer/base and @fencer/contract', (_file, text) => {
    expect(findForeignImports(text, allowed)).toEqual([]);
  });

  it.each(groupSources.map((s) => [s.file, s.text] as const))(
    '%s uses no clock, timer, unseeded randomness or node: module',
    (_file, text) => {
      expect(findForbiddenTokens(text)).toEqual([]);
    },
  );

  it.each(groupSources.map((s) => [s.file, s.text] as const))('%s imports only the pure group libraries', (_file, text) => {
    expect(findForeignImports(text, groupAllowed)).toEqual([]);
  });

  it('notices a planted timer and a foreign import', () => {
    const planted = `${sources[0]?.text ?? ''}\nsetTimeout(() => 1, 5);\nimport { x } from '@fencer/wal';\n`;
    expect(findForbiddenTokens(planted)).toHaveLength(1);
    expect(findForeignImports(planted, allowed).map((h) => h.text)).toEqual(['@fencer/wal']);
  });

  it("notices the lock cell's libraries planted in the group entry (the meta group builds on @fencer/group alone)", () => {
    const planted = `${groupSources[0]?.text ?? ''}\nimport { x } from '@fencer/cell';\nimport { y } from '@fencer/lock-fsm';\n`;
    expect(findForeignImports(planted, groupAllowed).map((h) => h.text)).toEqual(['@fencer/cell', '@fencer/lock-fsm']);
  });

  it('applies one history to the same bytes twice, and a restored copy goes on identically', () => {
    const history: MetaEntry[] = [
      { command: { kind: 'CreateTenant', namespace: 'payments', cell: 'cell-1', owner: 'Zoë', quotas: { maxLocks: 5 }, atMs: 1 } },
      { command: { kind: 'CreateTenant', namespace: 'search', cell: 'cell-2', atMs: 2 }, idempotency: { key: 'k1', fingerprint: 'f1' } },
      { command: { kind: 'StartMove', id: 'm1', namespace: 'payments', toCell: 'cell-2', atMs: 3 } },
      { command: { kind: 'AdvanceMove', id: 'm1', state: 'switching', atMs: 4 } },
      { command: { kind: 'RecordSnapshot', id: 's1', cell: 'cell-1', atMs: 5 } },
      { command: { kind: 'DeleteTenant', namespace: 'search' } },
    ];
    const run = (entries: MetaEntry[], fsm = new MetaStateMachine(), from = 1): MetaStateMachine => {
      entries.forEach((e, i) => fsm.apply(from + i, e));
      return fsm;
    };
    const a = run(history);
    const b = run(history);
    expect(a.snapshot()).toEqual(b.snapshot());
    const restored = run(history.slice(3), MetaStateMachine.restore(run(history.slice(0, 3)).snapshot()), 4);
    expect(restored.snapshot()).toEqual(a.snapshot());
    expect(a.routingVersion).toBe(4);
    expect(a.tenant('payments')?.cell).toBe('cell-2');
  });
});

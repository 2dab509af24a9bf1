/**
 * Goal: the file source keeps the promises the router relies on: versions
 * only grow, a broken file leaves the last table serving, the file is
 * reloaded on change, and auto-tenants places a namespace on the
 * least-loaded cell and rewrites the file atomically, once per namespace,
 * for every router sharing the file.
 * Method: a real file in a temp dir, changes seen through the source's own
 * stat polling and awaited as events.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { parseRoutingFile } from '@fencer/contract';
import { FileRoutingSource } from '../src/index.js';
import { file, nextTable } from './support/fake-control-plane.js';

const logger = pino({ level: 'silent' });

describe('FileRoutingSource', () => {
  let dir = '';
  let source: FileRoutingSource | undefined;
  afterEach(() => {
    source?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reloads a changed file, adopts only higher versions, and keeps the last table when the file breaks', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'routing-'));
    const f = path.join(dir, 'routing.json');
    writeFileSync(f, file(1, { a: 'cell-1' }));
    source = new FileRoutingSource(f, logger, 20);
    await source.start();
    expect(source.table().version).toBe(1);

    let changed = nextTable(source);
    writeFileSync(f, file(2, { a: 'cell-2' }));
    expect((await changed).routes.get('a')!.cell).toBe('cell-2');

    // An older version and a broken file are both ignored: the table in force stays.
    writeFileSync(f, file(1, { a: 'cell-1' }));
    expect((await source.refresh()).version).toBe(2);
    writeFileSync(f, '{ not json');
    expect((await source.refresh()).routes.get('a')!.cell).toBe('cell-2');

    changed = nextTable(source);
    writeFileSync(f, file(5, { a: 'cell-1', b: 'cell-2' }));
    expect((await changed).version).toBe(5);
  });

  it('auto-tenants: creates each namespace once, on the least-loaded cell, and rewrites the file with a higher version', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'routing-'));
    const f = path.join(dir, 'routing.json');
    writeFileSync(f, file(1, { a: 'cell-1' }));
    source = new FileRoutingSource(f, logger, 20);
    await source.start();
    const [t1, t2] = await Promise.all([source.createTenant('fresh'), source.createTenant('fresh')]);
    expect(t1.routes.get('fresh')!.cell).toBe('cell-2');
    expect(t2.routes.get('fresh')!.cell).toBe('cell-2');
    const t3 = await source.createTenant('other');
    expect(t3.routes.get('other')!.cell).toBe('cell-1');
    const onDisk = parseRoutingFile(JSON.parse(readFileSync(f, 'utf8')), f);
    expect(onDisk.version).toBe(3);
    expect([...onDisk.routes.keys()].sort()).toEqual(['a', 'fresh', 'other']);
    // A second router sharing the file sees the same tables.
    const other = new FileRoutingSource(f, logger, 20);
    await other.start();
    expect(other.table().routes.get('fresh')!.cell).toBe('cell-2');
    other.close();
  });
});

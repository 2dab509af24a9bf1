/**
 * Goal: the CLI finds routers and proxies as the issue says: FENCER_ENDPOINTS
 * and FENCER_PROXIES, or fleet.json's `lockService` (the routers) and
 * `proxies`; KeepAlive falls back to the endpoints when no proxy is named.
 * Method: resolveEndpoints on a temporary fleet.json and on environments.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, resolveEndpoints } from '../src/config.js';

let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function fleetDir(fleet: unknown): string {
  dir = mkdtempSync(path.join(tmpdir(), 'cli-fleet-'));
  mkdirSync(path.join(dir, '.fencer'));
  writeFileSync(path.join(dir, '.fencer', 'fleet.json'), JSON.stringify(fleet));
  return dir;
}

describe('endpoints of routers and proxies', () => {
  it('reads the routers from lockService and the proxies from fleet.json', () => {
    const cwd = fleetDir({
      lockService: ['127.0.0.1:7401'],
      routers: [{ id: 'router-1', grpc: '127.0.0.1:7401' }],
      proxies: [{ id: 'proxy-1', grpc: '127.0.0.1:7501' }, '127.0.0.1:7502'],
      cells: [],
    });
    expect(resolveEndpoints({}, {}, cwd)).toMatchObject({ endpoints: ['127.0.0.1:7401'], proxies: ['127.0.0.1:7501', '127.0.0.1:7502'] });
  });

  it('FENCER_PROXIES wins over fleet.json; FENCER_ENDPOINTS alone means no proxies', () => {
    const cwd = fleetDir({ lockService: ['127.0.0.1:7401'], proxies: ['127.0.0.1:7501'] });
    expect(resolveEndpoints({}, { FENCER_PROXIES: '127.0.0.1:9501,127.0.0.1:9502' }, cwd).proxies).toEqual([
      '127.0.0.1:9501',
      '127.0.0.1:9502',
    ]);
    expect(resolveEndpoints({}, { FENCER_ENDPOINTS: '127.0.0.1:9401' }, cwd)).toMatchObject({ endpoints: ['127.0.0.1:9401'], proxies: [] });
    expect(resolveEndpoints({}, { FENCER_ENDPOINTS: '127.0.0.1:9401', FENCER_PROXIES: '127.0.0.1:9501' }, cwd).proxies).toEqual([
      '127.0.0.1:9501',
    ]);
  });

  it('a fleet.json without proxies (one cell, no routers) still works, and a bad proxy entry is named', () => {
    expect(resolveEndpoints({}, {}, fleetDir({ lockService: ['127.0.0.1:7001'] })).proxies).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
    expect(() => resolveEndpoints({}, {}, fleetDir({ lockService: ['127.0.0.1:7001'], proxies: [{ id: 'p' }] }))).toThrow(ConfigError);
    expect(() => resolveEndpoints({}, { FENCER_PROXIES: 'nonsense' }, dir)).toThrow(/FENCER_PROXIES/);
  });
});

/**
 * Goal: the router's command line takes the routing flags it shares with
 * the proxy (a `--control-plane` list it can follow, exactly one source)
 * and its own, and refuses at parse time what it cannot run with.
 * Method: parseRouterConfig on literal argument lists.
 */
import { describe, expect, it } from 'vitest';
import { parseRouterConfig } from '../src/index.js';

describe('parseRouterConfig', () => {
  it('takes --control-plane as one URL or several, checked at parse time by the shared option (libs/routing tests every refusal)', () => {
    expect(parseRouterConfig(['--control-plane', 'http://a:1,https://b:2']).controlPlane).toBe('http://a:1,https://b:2');
    expect(() => parseRouterConfig(['--control-plane', 'http://a:1,http://a:1'])).toThrow(/twice/);
  });

  it('has the defaults the fleet launcher relies on, and refuses a bad address or a missing source', () => {
    const c = parseRouterConfig(['--routing', 'r.json']);
    expect(c).toMatchObject({
      listen: '127.0.0.1:6001',
      autoTenants: false,
      heartbeatIntervalMs: 250,
      cellCallsInFlightMax: 4_096,
      coalesceWatches: true,
    });
    expect(() => parseRouterConfig(['--routing', 'r.json', '--listen', 'nowhere'])).toThrow(/--listen must be host:port/);
    expect(() => parseRouterConfig([])).toThrow(/exactly one of --routing FILE or --control-plane/);
  });

  it('turns watch coalescing off with --no-coalesce-watches (the watch-fanout benchmark runs both)', () => {
    expect(parseRouterConfig(['--routing', 'r.json', '--no-coalesce-watches']).coalesceWatches).toBe(false);
  });
});

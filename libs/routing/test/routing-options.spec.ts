/**
 * Goal: the routing flags the router and the proxy share refuse, at parse
 * time and with a reason a person can act on, a `--control-plane` list a
 * router cannot follow and a command line naming no source or both; and
 * name the source they describe.
 * Method: the options on a commander Command with exitOverride, parsed from
 * literal argument lists.
 */
import { describe, expect, it } from 'vitest';
import { Command } from 'commander';
import { pino } from 'pino';
import {
  ControlPlaneRoutingSource,
  FileRoutingSource,
  checkRoutingChoice,
  parseControlPlaneUrls,
  routingOptions,
  routingSourceFor,
} from '../src/index.js';

/** Parses argv with the shared routing options; throws what commander throws. */
const parse = (argv: string[]): Record<string, unknown> => {
  const cmd = routingOptions(new Command('t').exitOverride().configureOutput({ writeErr: () => {} }));
  cmd.parse(argv, { from: 'user' });
  return cmd.opts();
};

describe('--control-plane URL[,URL...]', () => {
  it('takes one URL or several, and refuses entries a router cannot follow', () => {
    expect(parseControlPlaneUrls('http://127.0.0.1:7400')).toEqual(['http://127.0.0.1:7400']);
    expect(parseControlPlaneUrls('http://127.0.0.1:7400, http://127.0.0.1:7401')).toEqual([
      'http://127.0.0.1:7400',
      'http://127.0.0.1:7401',
    ]);
    expect(parse(['--control-plane', 'http://a:1, https://b:2']).controlPlane).toBe('http://a:1,https://b:2');
    for (const [bad, why] of [
      ['http://a:1,', /not a URL/],
      ['a:1', /not an http/],
      ['ftp://a:1', /not an http/],
      ['http://a:1,http://a:1', /twice/],
      ['http://user:secret@a:1', /FENCER_CONTROL_PLANE_TOKEN/],
    ] as const) {
      expect(() => parseControlPlaneUrls(bad)).toThrow(why);
      expect(() => parse(['--control-plane', bad])).toThrow(why);
    }
  });
});

describe('the routing choice', () => {
  it('wants exactly one of --routing and --control-plane, and names the source they describe', () => {
    expect(() => checkRoutingChoice(parse([]))).toThrow(/exactly one of --routing FILE or --control-plane/);
    expect(() => checkRoutingChoice(parse(['--routing', 'r.json', '--control-plane', 'http://a:1']))).toThrow(/exactly one/);
    const logger = pino({ level: 'silent' });
    const file = routingSourceFor(parse(['--routing', 'r.json']), logger);
    expect(file).toBeInstanceOf(FileRoutingSource);
    const cp = routingSourceFor(parse(['--control-plane', 'http://a:1,http://b:2']), logger);
    expect(cp).toBeInstanceOf(ControlPlaneRoutingSource);
    expect((cp as ControlPlaneRoutingSource).following()).toBe('http://a:1');
    cp.close();
  });

  it('holds --heartbeat-interval-ms to its minimum, and defaults it', () => {
    expect(parse([]).heartbeatIntervalMs).toBe(250);
    expect(parse(['--heartbeat-interval-ms', '5']).heartbeatIntervalMs).toBe(5);
    expect(() => parse(['--heartbeat-interval-ms', '4'])).toThrow(/--heartbeat-interval-ms must be an integer >= 5/);
  });
});

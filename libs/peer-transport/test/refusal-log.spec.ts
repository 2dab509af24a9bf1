/**
 * Goal: refused peer input is logged at most once per window, the first
 * refusal of a window with its fields, and the next warning says how many
 * went unlogged in between; so a flood of forged connections cannot flood
 * the log.
 * Method: a RefusalLog over a pino logger that records its lines, with an
 * injected clock.
 */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { RefusalLog } from '../src/refusal-log.js';

function recorded(): { lines: Record<string, unknown>[]; log: (now: () => number) => RefusalLog } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { lines, log: (now) => new RefusalLog(logger, 10_000, now) };
}

describe('RefusalLog', () => {
  it('logs the first refusal of a window, counts the rest, and reports the count with the next warning', () => {
    let t = 1_000;
    const { lines, log } = recorded();
    const refusals = log(() => t);
    refusals.warn({ remote: '127.0.0.1:1', reason: 'first' }, 'closing a peer connection');
    for (let i = 0; i < 999; i++) {
      t += 5;
      refusals.warn({ remote: '127.0.0.1:2', reason: `flood ${i}` }, 'closing a peer connection');
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, remote: '127.0.0.1:1', reason: 'first', msg: 'closing a peer connection' });
    expect(lines[0]).not.toHaveProperty('refusalsNotLogged');

    t = 1_000 + 10_000;
    refusals.warn({ remote: '127.0.0.1:3', reason: 'after the window' }, 'closing a peer connection');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ reason: 'after the window', refusalsNotLogged: 999 });

    t += 10_000;
    refusals.warn({ reason: 'alone' }, 'closing a peer connection');
    expect(lines).toHaveLength(3);
    expect(lines[2]).not.toHaveProperty('refusalsNotLogged');
  });
});

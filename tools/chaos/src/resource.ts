#!/usr/bin/env node
/**
 * The fenced resource: a separate process holding one counter per name, as a
 * storage service that checks fencing tokens would. A read or a write carries
 * the caller's token; the resource accepts it only when the token is at least
 * the highest it has seen for that name (and then remembers it). Reads count
 * as seeing a token too: a holder that read under token 12 has announced
 * that every holder below 12 is stale, so a paused holder with token 10
 * cannot write back what it read before.
 *
 * With `--no-fence` (the negative control) every read and write is accepted:
 * the checker must then find the lost updates that client pauses cause.
 *
 * HTTP on 127.0.0.1: POST /op {op: 'read'|'write', name, token, value?};
 * GET /state → counters and the log of every decision. The port goes to the
 * parent over IPC.
 */
import http from 'node:http';
import { assert } from '@fencer/base';

export interface ResourceDecision {
  readonly op: 'read' | 'write';
  readonly name: string;
  readonly token: number;
  readonly accepted: boolean;
  /** Counter value after the decision. */
  readonly value: number;
}

export interface ResourceState {
  readonly fence: boolean;
  readonly counters: Record<string, number>;
  readonly log: ResourceDecision[];
}

/** Decisions kept (a 30-minute soak makes tens of thousands). */
const DECISIONS_MAX = 2_000_000;

const fence = !process.argv.includes('--no-fence');
const counters = new Map<string, { value: number; highestToken: number }>();
const log: ResourceDecision[] = [];

function decide(op: 'read' | 'write', name: string, token: number, value: number): { accepted: boolean; value: number } {
  assert(Number.isSafeInteger(token) && token > 0, 'a token is a positive integer');
  let c = counters.get(name);
  if (!c) {
    c = { value: 0, highestToken: 0 };
    counters.set(name, c);
  }
  const accepted = !fence || token >= c.highestToken;
  if (accepted) {
    c.highestToken = Math.max(c.highestToken, token);
    if (op === 'write') c.value = value;
  }
  if (log.length < DECISIONS_MAX) log.push({ op, name, token, accepted, value: c.value });
  return { accepted, value: c.value };
}

const server = http.createServer((req, res) => {
  const answer = (status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (req.method === 'GET' && req.url === '/state') {
    const state: ResourceState = { fence, counters: Object.fromEntries([...counters].map(([k, v]) => [k, v.value])), log };
    return answer(200, state);
  }
  if (req.method !== 'POST' || req.url !== '/op') return answer(404, { error: 'not found' });
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => {
    body += chunk;
    if (body.length > 10_000) req.destroy();
  });
  req.on('end', () => {
    try {
      const m = JSON.parse(body) as { op: 'read' | 'write'; name: string; token: number; value?: number };
      if ((m.op !== 'read' && m.op !== 'write') || typeof m.name !== 'string' || !Number.isSafeInteger(m.token) || m.token <= 0) {
        return answer(400, { error: 'bad request' });
      }
      answer(200, decide(m.op, m.name, m.token, m.value ?? 0));
    } catch {
      answer(400, { error: 'bad json' });
    }
  });
});

server.listen(0, '127.0.0.1', () => {
  const port = (server.address() as import('node:net').AddressInfo).port;
  process.send?.({ port });
});
process.on('message', (m: unknown) => {
  if (m === 'stop') server.close(() => process.exit(0));
});
process.on('disconnect', () => process.exit(0));

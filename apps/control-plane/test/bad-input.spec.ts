/**
 * Goal: bad input never crashes the control plane or gets a 500: every
 * endpoint of the contract answers at least 1,000 generated schema-invalid
 * bodies, headers, paths and query strings with a 4xx problem document, and
 * the process's memory stays bounded while it does.
 * Method: fast-check generates, per endpoint, a mix of the mutations that
 * apply to it (bodies the contract's own schema rejects, text that is not
 * JSON, wrong content types, oversized bodies, Idempotency-Keys over 128
 * characters, malformed or unknown bearer tokens, path parameters outside
 * their pattern, junk path segments, query values of the wrong type) and
 * sends each through inject() to the real app on a one-member meta group with
 * auth on. Each answer must be 4xx, application/problem+json and valid under
 * the contract's Problem schema. RSS is sampled before and after (with a GC
 * when exposed) and must grow by less than 200 MiB. FUZZ_SEED replays a run.
 * Then samples of the same cases over a real socket, plain and TLS (the
 * latter with malformed HTTP inside TLS and plaintext on the TLS port).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { TlsFiles } from '@fencer/service';
import { issueTestCerts, opensslMissing } from '@fencer/service/testing';
import { absoluteRefs, contractAjv, openapi } from '../src/index.js';
import { checkContract, startHarness, type Harness } from './support/harness.js';

const ADMIN = 'fuzz-admin-token';
const PER_ENDPOINT = Number(process.env['FUZZ_PER_ENDPOINT'] ?? 1_000);
const SEED = Number(process.env['FUZZ_SEED'] ?? 20_261_201);

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
interface Endpoint {
  readonly method: Method;
  /** The contract's path, with {params}. */
  readonly template: string;
  /** Valid values of its path parameters (a mutation breaks one). */
  readonly params?: Record<string, string>;
  readonly public?: boolean;
  readonly idempotency?: boolean;
  readonly query?: 'routing' | 'force';
}

const ENDPOINTS: Endpoint[] = [
  { method: 'GET', template: '/v1/openapi.json', public: true },
  { method: 'GET', template: '/v1/health', public: true },
  { method: 'GET', template: '/v1/fleet' },
  { method: 'GET', template: '/v1/routing', query: 'routing' },
  { method: 'GET', template: '/v1/tenants' },
  { method: 'POST', template: '/v1/tenants', idempotency: true },
  { method: 'GET', template: '/v1/tenants/{namespace}', params: { namespace: 'fuzzed' } },
  { method: 'PATCH', template: '/v1/tenants/{namespace}', params: { namespace: 'fuzzed' }, idempotency: true },
  { method: 'DELETE', template: '/v1/tenants/{namespace}', params: { namespace: 'fuzzed' }, query: 'force', idempotency: true },
  { method: 'POST', template: '/v1/tenants/{namespace}/token', params: { namespace: 'fuzzed' }, idempotency: true },
  { method: 'GET', template: '/v1/moves' },
  { method: 'POST', template: '/v1/moves', idempotency: true },
  { method: 'GET', template: '/v1/moves/{id}', params: { id: 'no-such-move' } },
  { method: 'GET', template: '/v1/cells/{cell}/snapshots', params: { cell: 'cell-1' } },
  { method: 'POST', template: '/v1/cells/{cell}/snapshots', params: { cell: 'cell-1' }, idempotency: true },
  { method: 'GET', template: '/v1/cells/{cell}/snapshots/{id}', params: { cell: 'cell-1', id: 'no-such-snapshot' } },
];

const ajv = contractAjv({ coerceTypes: false });
function bodySchemaOf(e: Endpoint): ((v: unknown) => boolean) | undefined {
  const op = (
    openapi.paths[e.template] as Record<string, { requestBody?: { content: Record<string, { schema: unknown }> } }> | undefined
  )?.[e.method.toLowerCase()];
  const schema = op?.requestBody?.content['application/json']?.schema;
  if (schema === undefined) return undefined;
  const v = ajv.compile(absoluteRefs(schema) as object);
  return (x) => v(x) as boolean;
}

interface Case {
  url: string;
  headers: Record<string, string>;
  payload?: string;
  what: string;
}

const goodHeaders = { authorization: `Bearer ${ADMIN}` };
const notJson = fc.string({ maxLength: 40 }).filter((s) => {
  try {
    JSON.parse(s);
    return false;
  } catch {
    return true;
  }
});
/** A path segment outside the tenant-name pattern (or a junk one for other params). */
const badNamespace = fc.oneof(
  fc.constantFrom('-lead', '.dot', '_under', 'a'.repeat(64), 'sp%20ace', '%C3%A9t%C3%A9', '%00', 'a%2Fb', '..'),
  fc
    .string({ minLength: 1, maxLength: 20 })
    .filter((s) => !/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(s))
    .map(encodeURIComponent),
);

function casesFor(e: Endpoint): fc.Arbitrary<Case> {
  const url = (params: Record<string, string> = {}) =>
    e.template.replace(/\{(\w+)\}/g, (_, k: string) => params[k] ?? e.params?.[k] ?? 'x');
  const arbs: fc.Arbitrary<Case>[] = [];
  // Paths: a junk extra segment (no such route) or a junk prefix.
  arbs.push(
    fc
      .string({ minLength: 1, maxLength: 12 })
      .map((s) => ({ url: `${url()}/${encodeURIComponent(s)}`, headers: goodHeaders, what: 'extra segment' })),
  );
  arbs.push(
    fc
      .constantFrom('/v0', '/v1x', '/V1', '/api/v1')
      .map((p) => ({ url: url().replace('/v1', p), headers: goodHeaders, what: 'wrong prefix' })),
  );
  if (!e.public) {
    const badAuth = fc.oneof(
      fc.constant(''),
      fc.string({ maxLength: 30 }).map((s) => `Basic ${s}`),
      fc.string({ maxLength: 30 }).map((s) => `Bearer${s}`),
      fc.stringMatching(/^[\x21-\x7e]{1,40}$/).map((s) => `Bearer ${s}`),
    );
    arbs.push(badAuth.map((a): Case => ({ url: url(), headers: a === '' ? {} : { authorization: a }, what: 'bad authorization' })));
  }
  if (e.params?.['namespace'] !== undefined)
    arbs.push(badNamespace.map((ns) => ({ url: url({ namespace: ns }), headers: goodHeaders, what: 'bad namespace' })));
  if (e.params?.['cell'] !== undefined)
    arbs.push(
      fc
        .stringMatching(/^[a-z0-9-]{1,10}$/)
        .filter((c) => c !== 'cell-1' && c !== 'cell-2')
        .map((c) => ({ url: url({ cell: c }), headers: goodHeaders, what: 'unknown cell' })),
    );
  if (e.params?.['id'] !== undefined)
    arbs.push(
      fc.stringMatching(/^[a-z0-9-]{1,16}$/).map((id) => ({ url: url({ id: `zz-${id}` }), headers: goodHeaders, what: 'unknown id' })),
    );
  if (e.idempotency) {
    arbs.push(
      fc
        .string({ minLength: 129, maxLength: 300 })
        .filter((k) => /^[\x20-\x7e]+$/.test(k))
        .map((k) => ({ url: url(), headers: { ...goodHeaders, 'idempotency-key': k }, what: 'long idempotency key' })),
    );
  }
  if (e.query === 'routing') {
    const badNumber = fc.oneof(fc.constantFrom('-1', 'abc', '1.5', '', 'NaN', '1e-3', 'x1'), fc.integer({ min: 60_001 }).map(String));
    arbs.push(
      fc
        .tuple(fc.constantFrom('sinceVersion', 'waitMs'), badNumber)
        .filter(([k, v]) => !(k === 'sinceVersion' && /^\d+$/.test(v)) && v !== '')
        .map(([k, v]) => ({ url: `${url()}?${k}=${encodeURIComponent(v)}`, headers: goodHeaders, what: 'bad query' })),
    );
  }
  if (e.query === 'force')
    arbs.push(
      fc
        .constantFrom('yes', '2', 'maybe', 'TRUEISH', '[]')
        .map((v) => ({ url: `${url()}?force=${v}`, headers: goodHeaders, what: 'bad force' })),
    );
  const valid = bodySchemaOf(e);
  if (valid !== undefined) {
    const json = { ...goodHeaders, 'content-type': 'application/json' };
    arbs.push(
      fc
        .jsonValue({ maxDepth: 3 })
        .filter((v) => !valid(v))
        .map((v) => ({ url: url(), headers: json, payload: JSON.stringify(v), what: 'schema-invalid body' })),
    );
    arbs.push(
      fc
        .record(
          {
            namespace: fc.oneof(fc.string(), fc.integer()),
            cell: fc.oneof(fc.string(), fc.constant(null)),
            quotas: fc.dictionary(fc.string(), fc.jsonValue()),
            graceMs: fc.oneof(fc.double(), fc.string()),
            toCell: fc.integer(),
            extra: fc.jsonValue(),
          },
          { requiredKeys: [] },
        )
        .filter((v) => !valid(v))
        .map((v) => ({ url: url(), headers: json, payload: JSON.stringify(v), what: 'near-miss body' })),
    );
    arbs.push(notJson.map((s) => ({ url: url(), headers: json, payload: s, what: 'not JSON' })));
    arbs.push(
      fc.constantFrom('text/plain', 'application/xml', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded').map((t) => ({
        url: url(),
        headers: { ...goodHeaders, 'content-type': t },
        payload: '{"namespace":"abc"}',
        what: 'wrong content type',
      })),
    );
    arbs.push(
      fc.constant({
        url: url(),
        headers: json,
        payload: JSON.stringify({ namespace: 'big', owner: 'x'.repeat(70 * 1024) }),
        what: 'oversized body',
      }),
    );
  }
  return fc.oneof(...arbs);
}

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ adminToken: ADMIN });
});
afterAll(async () => {
  await h?.close();
});

describe(`bad input (seed ${SEED}, ${PER_ENDPOINT} per endpoint)`, () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  let rssBefore = 0;
  beforeAll(() => {
    gc?.();
    rssBefore = process.memoryUsage().rss;
  });

  it.each(ENDPOINTS.map((e) => [`${e.method} ${e.template}`, e] as const))('%s answers 4xx problem documents only', async (_name, e) => {
    const cases = fc.sample(casesFor(e), { numRuns: PER_ENDPOINT, seed: SEED });
    expect(cases.length).toBe(PER_ENDPOINT);
    const statuses = new Map<number, number>();
    for (const c of cases) {
      const res = await h.app.inject({
        method: e.method,
        url: c.url,
        headers: c.headers,
        ...(c.payload !== undefined ? { payload: c.payload } : {}),
      });
      if (res.statusCode < 400 || res.statusCode >= 500) {
        throw new Error(
          `${e.method} ${c.url} (${c.what}, headers ${JSON.stringify(c.headers)}, body ${c.payload?.slice(0, 200)}) answered ${res.statusCode}: ${res.body.slice(0, 300)}`,
        );
      }
      checkContract(e.method, c.url, res);
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    }
    expect([...statuses.keys()].every((s) => s >= 400 && s < 500)).toBe(true);
  });

  it('kept its memory bounded', () => {
    gc?.();
    const grownMiB = (process.memoryUsage().rss - rssBefore) / (1024 * 1024);
    expect(grownMiB).toBeLessThan(200);
  });
});

/** Cases per endpoint sent over a real socket (beside the inject() ones): what a client's HTTP stack and the server's parser add. */
const SOCKET_PER_ENDPOINT = Number(process.env['FUZZ_SOCKET_PER_ENDPOINT'] ?? 100);

describe(`bad input over a real socket on 127.0.0.1 (seed ${SEED}, ${SOCKET_PER_ENDPOINT} per endpoint)`, () => {
  let base = '';
  beforeAll(async () => {
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });

  it('answers every endpoint’s generated bad requests with 4xx, never 500', async () => {
    let sent = 0;
    let refusedByClient = 0;
    for (const e of ENDPOINTS) {
      for (const c of fc.sample(casesFor(e), { numRuns: SOCKET_PER_ENDPOINT, seed: SEED + 1 })) {
        let res: Response;
        try {
          res = await fetch(new URL(c.url, base), {
            method: e.method,
            headers: c.headers,
            ...(c.payload !== undefined ? { body: c.payload } : {}),
            signal: AbortSignal.timeout(10_000),
          });
        } catch (err) {
          // fetch itself refuses some generated headers (control characters): nothing reached the server.
          if (err instanceof TypeError && !/fetch failed/.test(err.message)) {
            refusedByClient++;
            continue;
          }
          throw new Error(`${e.method} ${c.url} (${c.what}): no answer: ${(err as Error).message}`);
        }
        const body = await res.text();
        if (res.status < 400 || res.status >= 500)
          throw new Error(`${e.method} ${c.url} (${c.what}) answered ${res.status}: ${body.slice(0, 300)}`);
        sent++;
      }
    }
    expect(sent).toBeGreaterThan(ENDPOINTS.length * SOCKET_PER_ENDPOINT * 0.9 - refusedByClient);
  }, 240_000);

  it('answers malformed HTTP with 400 or a closed connection, and keeps serving', async () => {
    const { port } = new URL(base);
    const garbage = [
      'GET /v1/tenants HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
      'POST /v1/tenants HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'GET /v1/tenants HTTP/9.9\r\n\r\n',
      'GET \x00\x01 HTTP/1.1\r\n\r\n',
      'PATCH /v1/tenants/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{"quo',
      `GET /v1/tenants?${'a=1&'.repeat(5_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      `GET /v1/tenants HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(100_000)}\r\n\r\n`,
    ];
    const net = await import('node:net');
    for (const g of garbage) {
      const answer = await new Promise<string>((resolve) => {
        const socket = net.connect({ host: '127.0.0.1', port: Number(port) });
        let got = '';
        const timer = setTimeout(() => socket.destroy(), 5_000);
        socket.on('connect', () => socket.end(g));
        socket.on('data', (d: Buffer) => void (got += d.toString('latin1')));
        socket.on('error', () => {});
        socket.on('close', () => {
          clearTimeout(timer);
          resolve(got);
        });
      });
      const statusLine = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (statusLine) expect(Number(statusLine[1]), `${JSON.stringify(g.slice(0, 60))} answered ${answer.slice(0, 200)}`).toBeLessThan(500);
    }
    const health = await fetch(new URL('/v1/health', base));
    expect(health.status).toBeLessThan(500);
  });
});

/**
 * The same over TLS (the control plane's --tls-* flags, as `npm start -- --secure` runs it): generated bad
 * requests and malformed HTTP on a real TLS socket, with certificates from tools/scripts/dev-ca.mjs (openssl;
 * without it this part skips and says so, and fails under CI=true).
 */
const opensslGone = opensslMissing();
if (opensslGone !== undefined && process.env['CI'] === 'true') throw new Error(`bad-input.spec (TLS): ${opensslGone}; CI=true needs it`);

describe.skipIf(opensslGone !== undefined)(`bad input over a real TLS socket (seed ${SEED}, ${SOCKET_PER_ENDPOINT} per endpoint)`, () => {
  let secure: Harness | undefined;
  let files: TlsFiles | undefined;
  let base = '';
  let ca = Buffer.alloc(0);
  const dir = mkdtempSync(path.join(tmpdir(), 'fencer-cp-badtls-'));
  beforeAll(async () => {
    const paths = issueTestCerts(dir, [{ name: 'cp-1', kind: 'control-plane' }])['cp-1']!;
    files = new TlsFiles(paths);
    ca = readFileSync(paths.ca);
    secure = await startHarness({ adminToken: ADMIN, https: files });
    base = (await secure.app.listen({ host: '127.0.0.1', port: 0 })).replace(/^http:/, 'https:');
  });
  afterAll(async () => {
    await secure?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One request over TLS trusting the test CA: its status, or the error that kept it from an answer. */
  function send(method: string, url: string, headers: Record<string, string>, payload?: string): Promise<number | Error> {
    return new Promise((resolve) => {
      let req: ReturnType<typeof httpsRequest>;
      try {
        req = httpsRequest(new URL(url, base), { method, headers, ca, timeout: 10_000 }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
      } catch (err) {
        // node:https refuses some generated headers (control characters) before sending: nothing reached the server.
        resolve(err as Error);
        return;
      }
      req.on('error', (err) => resolve(err));
      req.end(payload);
    });
  }

  it('answers every endpoint’s generated bad requests with 4xx, never 500', async () => {
    expect(base).toMatch(/^https:/);
    let sent = 0;
    for (const e of ENDPOINTS) {
      for (const c of fc.sample(casesFor(e), { numRuns: SOCKET_PER_ENDPOINT, seed: SEED + 2 })) {
        const got = await send(e.method, c.url, c.headers, c.payload);
        if (got instanceof Error) {
          if ((got as { code?: string }).code === 'ERR_INVALID_CHAR' || (got as { code?: string }).code === 'ERR_INVALID_HTTP_TOKEN')
            continue;
          throw new Error(`${e.method} ${c.url} (${c.what}): no answer: ${got.message}`);
        }
        if (got < 400 || got >= 500) throw new Error(`${e.method} ${c.url} (${c.what}) answered ${got}`);
        sent++;
      }
    }
    expect(sent).toBeGreaterThan(ENDPOINTS.length * SOCKET_PER_ENDPOINT * 0.8);
  }, 240_000);

  it('answers malformed HTTP inside TLS with 400 or a closed connection, refuses plaintext, and keeps serving', async () => {
    const { port } = new URL(base);
    const garbage = [
      'GET /v1/tenants HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
      'POST /v1/tenants HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'GET \x00\x01 HTTP/1.1\r\n\r\n',
      `GET /v1/tenants HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(100_000)}\r\n\r\n`,
    ];
    for (const g of garbage) {
      const answer = await new Promise<string>((resolve) => {
        const socket = tlsConnect({ host: '127.0.0.1', port: Number(port), ca, servername: 'localhost' });
        let got = '';
        const timer = setTimeout(() => socket.destroy(), 5_000);
        socket.on('secureConnect', () => socket.end(g));
        socket.on('data', (d: Buffer) => void (got += d.toString('latin1')));
        socket.on('error', () => {});
        socket.on('close', () => {
          clearTimeout(timer);
          resolve(got);
        });
      });
      const statusLine = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (statusLine) expect(Number(statusLine[1]), `${JSON.stringify(g.slice(0, 60))} answered ${answer.slice(0, 200)}`).toBeLessThan(500);
    }
    // Plain HTTP on the TLS port gets no HTTP answer.
    await expect(fetch(new URL('/v1/health', base.replace(/^https:/, 'http:')), { signal: AbortSignal.timeout(10_000) })).rejects.toThrow();
    expect(await send('GET', '/v1/health', {})).toBe(200);
  });
});

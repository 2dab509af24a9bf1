/**
 * Moves over a test fleet's control plane, for the process-level move
 * tests: JSON over HTTP to any instance (a follower forwards to the
 * leader), starting a move and waiting for it to reach a state.
 */
import { performance } from 'node:perf_hooks';

export interface MoveBody {
  id: string;
  namespace: string;
  fromCell: string;
  toCell: string;
  state: string;
  error?: string;
  sessions?: number;
  locks?: number;
  revision?: number;
  unavailableMs?: number;
}

/** One request; a connection failure (an instance killed) answers status 0. */
/** A JSON body as the tests read it: fields are checked by the tests' expectations. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field by each test's expect()
type Json = any;

export async function http(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 10_000,
): Promise<{ status: number; body: Json }> {
  try {
    const res = await fetch(new URL(path, url), {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  } catch (e) {
    return { status: 0, body: { detail: (e as Error).message } };
  }
}

/** The first instance of `urls` that answers `path` with 200, retried until timeoutMs. */
export async function getFromAny(urls: readonly string[], path: string, timeoutMs = 30_000): Promise<Json> {
  const deadline = performance.now() + timeoutMs;
  let last = '';
  for (;;) {
    for (const url of urls) {
      const res = await http(url, 'GET', path);
      if (res.status === 200) return res.body;
      last = `${url}: ${res.status} ${JSON.stringify(res.body)}`;
    }
    if (performance.now() > deadline) throw new Error(`GET ${path} did not answer 200 within ${timeoutMs} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startMove(url: string, namespace: string, toCell: string): Promise<MoveBody> {
  const res = await http(url, 'POST', '/v1/moves', { namespace, toCell });
  if (res.status !== 202) throw new Error(`POST /v1/moves: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as MoveBody;
}

/** Polls the move (every 20 ms) until `done(move)` holds; rejects after timeoutMs. */
export async function waitForMove(
  urls: readonly string[],
  id: string,
  done: (m: MoveBody) => boolean = (m) => m.state === 'done' || m.state === 'failed',
  timeoutMs = 120_000,
): Promise<MoveBody> {
  const deadline = performance.now() + timeoutMs;
  let last: MoveBody | undefined;
  for (;;) {
    last = (await getFromAny(urls, `/v1/moves/${id}`, Math.max(1_000, deadline - performance.now()))) as MoveBody;
    if (done(last)) return last;
    if (performance.now() > deadline) throw new Error(`move ${id} stayed ${last.state} for ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The route of `namespace` in the control plane's routing table. */
export async function routeOf(urls: readonly string[], namespace: string): Promise<{ cell: string; state: string } | undefined> {
  const routing = await getFromAny(urls, '/v1/routing');
  return (routing.routes as { namespace: string; cell: string; state: string }[]).find((r) => r.namespace === namespace);
}

/**
 * Writes to the meta group, with their Idempotency-Key. The key travels in
 * the log entry with a fingerprint of the request (method, path, query and
 * body as stable JSON), so a retry with the same key gets the first answer,
 * even from a new leader, and the same key on another request is refused
 * (IDEMPOTENCY_KEY_REUSED, decided by @fencer/meta-fsm).
 */
import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { isMetaFailure, type MetaApplied, type MetaCommand, type MetaEntry } from '@fencer/meta-fsm';
import { writesInFlightMax } from '../limits.js';
import type { MetaStore } from '../meta-group.js';
import { openapi } from '../openapi.js';
import { ProblemError } from '../problems.js';

/** The headers schema of every write route: the contract's Idempotency-Key parameter. */
export const IDEMPOTENCY_HEADERS = {
  type: 'object',
  properties: { 'idempotency-key': (openapi.components.parameters['IdempotencyKey'] as { schema: unknown }).schema },
};

/** Proposes `command` for this request; resolves once applied, throws the outcome's problem when the state machine refused it. */
export type MetaWrite = (request: FastifyRequest, command: MetaCommand) => Promise<MetaApplied>;

/** Stable JSON (keys sorted) for request fingerprints: the same body in another key order is the same request. */
function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** What makes two requests under one key the same request. */
function fingerprintOf(request: FastifyRequest): string {
  const what = `${request.method} ${request.url.split('?')[0]}\n${stableJson(request.query ?? {})}\n${stableJson(request.body ?? null)}`;
  return createHash('sha256').update(what).digest('hex');
}

/** The log entry of `command`, carrying the request's Idempotency-Key when it has one. */
function entryOf(request: FastifyRequest, command: MetaCommand): MetaEntry {
  const key = request.headers['idempotency-key'];
  if (typeof key !== 'string' || key === '') return { command };
  return { command, idempotency: { key, fingerprint: fingerprintOf(request) } };
}

/** The app's one writer: at most writesInFlightMax writes wait for the meta group at once on this instance. */
export function metaWriter(meta: MetaStore): MetaWrite {
  let writesInFlight = 0;
  return async (request, command) => {
    if (writesInFlight >= writesInFlightMax)
      throw new ProblemError('RESOURCE_EXHAUSTED', `more than ${writesInFlightMax} writes in flight here; retry`);
    const entry = entryOf(request, command);
    writesInFlight++;
    try {
      const applied = await meta.write(entry);
      if (isMetaFailure(applied.outcome)) throw new ProblemError(applied.outcome.code, applied.outcome.detail);
      return applied;
    } finally {
      writesInFlight--;
    }
  };
}

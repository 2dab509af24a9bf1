/**
 * Goal: every error reason the contract names travels with the status code
 * the contract gives it, and survives the trip through gRPC metadata.
 * Method: parse the reason table from the contract's header comment (so a
 * reason added there without a table entry fails here), compare with
 * ERROR_TABLE, then convert each to a ServiceError and back.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Metadata, status } from '@grpc/grpc-js';
import { ERROR_CODES, FencerError, type ErrorCode } from '@fencer/base';
import {
  ERROR_DETAILS_CHARS_MAX,
  ERROR_TABLE,
  LEADER_HINT_KEY,
  LOCK_REASON_KEY,
  fromServiceError,
  isRetryable,
  toServiceError,
} from '../src/index.js';

const contract = readFileSync(
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../proto/lockservice/v1/lockservice.proto'),
  'utf8',
);

/** Lines such as `//     UNAVAILABLE        reason NOT_LEADER | NO_LEADER | NAMESPACE_MOVING (retry …)`. */
function contractReasons(): { reason: string; statuses: string[] }[] {
  const rows: { reason: string; statuses: string[] }[] = [];
  for (const line of contract.split('\n')) {
    const m = /^\/\/\s+([A-Z_]+(?:\s*\/\s*[A-Z_]+)*)\s+reason\s+(.+)$/.exec(line);
    if (!m) continue;
    const statuses = m[1]!.split('/').map((s) => s.trim());
    const reasons = m[2]!
      .replace(/\(.*\)/, '')
      .split('|')
      .map((s) => s.trim())
      .filter(Boolean);
    for (const reason of reasons) rows.push({ reason, statuses });
  }
  return rows;
}

describe('error table against the contract', () => {
  const rows = contractReasons();

  it('finds the contract header table', () => {
    expect(rows.length).toBe(14);
  });

  it.each(rows)('$reason is mapped to the status the contract gives it', ({ reason, statuses }) => {
    expect(ERROR_CODES).toContain(reason);
    const spec = ERROR_TABLE[reason as ErrorCode];
    expect(statuses.map((s) => status[s as keyof typeof status])).toContain(spec.grpc);
  });

  it('marks the contract\'s "retry with the same request_id" reasons retryable, and only those of its list', () => {
    expect(isRetryable('NOT_LEADER')).toBe(true);
    expect(isRetryable('NO_LEADER')).toBe(true);
    expect(isRetryable('NAMESPACE_MOVING')).toBe(true);
    expect(isRetryable('INVALID_NAME')).toBe(false);
    expect(isRetryable('NAMESPACE_NOT_HERE')).toBe(false);
  });

  it.each([...ERROR_CODES])('%s survives toServiceError → fromServiceError with its leader hint', (code) => {
    const err = toServiceError(new FencerError(code, `because ${code}`, '127.0.0.1:7003'));
    expect(err.code).toBe(ERROR_TABLE[code].grpc);
    expect(err.metadata.get(LOCK_REASON_KEY)).toEqual([code]);
    expect(err.metadata.get(LEADER_HINT_KEY)).toEqual(['127.0.0.1:7003']);
    const back = fromServiceError({ code: err.code, details: err.details!, metadata: err.metadata });
    expect(back.code).toBe(code);
    expect(back.message).toBe(`because ${code}`);
    expect(back.leaderHint).toBe('127.0.0.1:7003');
  });

  it('maps a bare status without lock-reason to a sensible code', () => {
    const back = fromServiceError({ code: status.UNAVAILABLE, details: 'connect failed', metadata: new Metadata() });
    expect(back.code).toBe('NO_LEADER');
    expect(isRetryable(back.code)).toBe(true);
    expect(fromServiceError({ code: status.UNKNOWN, details: '', metadata: new Metadata() }).code).toBe('INTERNAL');
    // grpc-js's own size refusal: the same request can never succeed, so the client must not retry it.
    const big = fromServiceError({
      code: status.RESOURCE_EXHAUSTED,
      details: 'Received message larger than max',
      metadata: new Metadata(),
    });
    expect(big.code).toBe('MESSAGE_TOO_LARGE');
    expect(isRetryable(big.code)).toBe(false);
  });
});

describe('an error quoting what the caller sent', () => {
  it('sends at most ERROR_DETAILS_CHARS_MAX characters of its message, saying how many were cut', () => {
    const name = 'x'.repeat(100_000);
    const message = `invalid namespace "${name}"`;
    const e = toServiceError(new FencerError('INVALID_NAME', message));
    expect(e.details!.length).toBeLessThan(ERROR_DETAILS_CHARS_MAX + 64);
    expect(e.details).toBe(
      `${message.slice(0, ERROR_DETAILS_CHARS_MAX)}… (${message.length - ERROR_DETAILS_CHARS_MAX} more characters cut)`,
    );
    expect(e.metadata.get(LOCK_REASON_KEY)).toEqual(['INVALID_NAME']);
    expect(toServiceError(new FencerError('INVALID_NAME', 'short')).details).toBe('short');
  });
});

/**
 * Goal: the CLI reads what a `--secure` fleet asks of a client from its
 * environment: $FENCER_TOKEN becomes the client's tenant token, $FENCER_TLS_CA
 * turns TLS on (with an operator's pair when $FENCER_TLS_CERT and
 * $FENCER_TLS_KEY are set), nothing set means plaintext and no token, and an
 * unreadable file is a usage error naming the variable.
 * Method: securityOf on literal environments; the CA file is a real PEM from
 * tools/scripts/dev-ca.mjs (openssl), or the TLS cases skip without openssl.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ChannelCredentials } from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { issueTestCerts, opensslMissing } from '@fencer/service/testing';
import { securityOf } from '../src/run-context.js';

const dir = mkdtempSync(path.join(tmpdir(), 'fencer-cli-tls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const missing = opensslMissing();

describe('security from the environment', () => {
  it('takes the token from FENCER_TOKEN, and nothing when nothing is set', () => {
    expect(securityOf({})).toEqual({});
    expect(securityOf({ FENCER_TOKEN: 'tok-1' })).toEqual({ token: 'tok-1' });
  });

  it.skipIf(missing !== undefined)('turns TLS on from FENCER_TLS_CA, with an operator pair when given', () => {
    const op = issueTestCerts(dir, [{ name: 'op', kind: 'operator' }])['op']!;
    const serverOnly = securityOf({ FENCER_TLS_CA: op.ca });
    expect(serverOnly.credentials).toBeInstanceOf(ChannelCredentials);
    expect(serverOnly.credentials?._isSecure()).toBe(true);
    const mutual = securityOf({ FENCER_TLS_CA: op.ca, FENCER_TLS_CERT: op.cert, FENCER_TLS_KEY: op.key, FENCER_TOKEN: 't' });
    expect(mutual.credentials?._isSecure()).toBe(true);
    expect(mutual.token).toBe('t');
  });

  it('names the variable whose file cannot be read', () => {
    expect(() => securityOf({ FENCER_TLS_CA: path.join(dir, 'absent.crt') })).toThrow(/FENCER_TLS_CA: cannot read/);
  });
});

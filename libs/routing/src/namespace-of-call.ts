/** The namespace a call is routed by: of its lock name, its prefix, or its session id (a session id embeds its namespace). */
import { FencerError, type ErrorCode } from '@fencer/base';
import { isValidNamespace, namespaceOfSessionId, parseLockName, parseLockPrefix } from '@fencer/contract';

/** The contract's unary methods, as grpc-js names their handlers. */
export type UnaryMethod = 'openSession' | 'acquire' | 'release' | 'checkToken' | 'getLock' | 'listLocks' | 'closeSession';

/** Throws the contract's error: the answer a call gets in the contract's words. */
export const fail = (code: ErrorCode, message: string): never => {
  throw new FencerError(code, message);
};

/** The namespace a call names, or the contract's error for a name, prefix or id that names none. */
export function namespaceOfCall(method: UnaryMethod | 'watch', req: Record<string, unknown>): { namespace: string; bySession: boolean } {
  const str = (k: string): string => (typeof req[k] === 'string' ? (req[k] as string) : '');
  switch (method) {
    case 'openSession': {
      const ns = str('namespace');
      if (!isValidNamespace(ns))
        fail('INVALID_NAME', `namespace "${ns.slice(0, 80)}" must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."`);
      return { namespace: ns, bySession: false };
    }
    case 'acquire':
    case 'release':
    case 'closeSession': {
      const id = str('sessionId');
      if (id === '') fail('SESSION_NOT_FOUND', 'session_id is empty: open a session first');
      const ns = namespaceOfSessionId(id);
      if (ns === undefined) fail('SESSION_NOT_FOUND', `session "${id.slice(0, 80)}" does not exist (malformed id)`);
      return { namespace: ns as string, bySession: true };
    }
    case 'checkToken':
    case 'getLock': {
      const p = parseLockName(str('name'));
      if (!p.ok) fail(p.code, p.message);
      return { namespace: (p as { namespace: string }).namespace, bySession: false };
    }
    case 'listLocks': {
      const p = parseLockPrefix(str('prefix'));
      if (!p.ok) fail(p.code, p.message);
      return { namespace: (p as { namespace: string }).namespace, bySession: false };
    }
    case 'watch': {
      const p = req.prefix === true ? parseLockPrefix(str('name')) : parseLockName(str('name'));
      if (!p.ok) fail(p.code, p.message);
      return { namespace: (p as { namespace: string }).namespace, bySession: false };
    }
  }
}

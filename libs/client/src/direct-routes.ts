/**
 * Direct mode (docs/decisions/0015-clients-may-skip-the-router.md): the
 * client learns, through the routers, which replica serves each namespace
 * (a router names it in the trailing metadata of an answer when asked,
 * ROUTE_LEADER_KEY) and calls that replica directly from then on, skipping
 * the router's hop. Any answer that says the replica is no longer the place
 * (NAMESPACE_NOT_HERE after a move, NOT_LEADER, any other retryable error
 * or a transport error) forgets the namespace's entry, and the call goes
 * through a router again, which teaches the new place. Cells stay the last
 * word on ownership (decision 0005): a stale entry costs one retry.
 */
import { namespaceOfSessionId, parseLockName, parseLockPrefix } from '@fencer/contract';
import { CLIENT_LIMITS } from './limits.js';

type Request = Record<string, unknown>;

/** The namespace a unary call names (as a router routes it), or undefined for a malformed one (the router answers those). */
export function namespaceOfRequest(method: string, req: Request): string | undefined {
  const str = (k: string): string => (typeof req[k] === 'string' ? (req[k] as string) : '');
  switch (method) {
    case 'openSession':
      return str('namespace') || undefined;
    case 'acquire':
    case 'release':
    case 'closeSession':
      return namespaceOfSessionId(str('sessionId'));
    case 'checkToken':
    case 'getLock': {
      const p = parseLockName(str('name'));
      return p.ok ? p.namespace : undefined;
    }
    case 'listLocks': {
      const p = parseLockPrefix(str('prefix'));
      return p.ok ? p.namespace : undefined;
    }
    default:
      return undefined;
  }
}

export class DirectRoutes {
  /** namespace → the replica that last served it; oldest first, at most CLIENT_LIMITS.directNamespacesMax. */
  private readonly leaders = new Map<string, string>();
  /** Calls sent straight to a replica, and those that fell back to a router (for tests and benchmarks). */
  direct = 0;
  fallbacks = 0;

  leaderOf(namespace: string | undefined): string | undefined {
    return namespace === undefined ? undefined : this.leaders.get(namespace);
  }

  /** A router said `address` served the namespace: call it directly from now on. */
  learn(namespace: string | undefined, address: string): void {
    if (namespace === undefined) return;
    this.leaders.delete(namespace);
    this.leaders.set(namespace, address);
    if (this.leaders.size > CLIENT_LIMITS.directNamespacesMax) this.leaders.delete(this.leaders.keys().next().value as string);
  }

  /** A direct call failed in a way that says look again: the next call goes through a router. */
  forget(namespace: string | undefined): void {
    if (namespace !== undefined) this.leaders.delete(namespace);
    this.fallbacks++;
  }
}

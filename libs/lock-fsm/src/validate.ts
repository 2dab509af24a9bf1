/**
 * Stateless checks of command fields. The server runs `validateCommand`
 * before proposing, so bad input is answered at once and never reaches the
 * log; the state machine runs the same checks again on apply (it must not
 * trust that every proposer validated), and answers with the same outcome.
 */
import { unreachable } from '@fencer/base';
import {
  type ContractProblem,
  LOCK_DELAY_MS_MAX,
  NAMESPACE_BYTES_MAX,
  TTL_MS_MAX,
  TTL_MS_MIN,
  WAIT_MS_MAX,
  checkClientId as contractClientId,
  checkMemberId as contractMemberId,
  checkRequestId as contractRequestId,
  checkSessionId as contractSessionId,
  isLockNameIn,
  isValidNamespace,
  namespaceOfSessionId,
  validateLockName,
} from '@fencer/contract';
import type { Command } from './commands.js';
import { checkQuotas } from './quotas.js';
import { checkMoveFence } from './move-fence.js';
import { checkCredentials } from './credentials.js';
import type { Failure, FsmErrorCode, LockMode } from './types.js';

export function fail(code: FsmErrorCode, message: string): Failure {
  return { ok: false, code, message };
}

export function isFailure(x: unknown): x is Failure {
  return (x as Failure | undefined)?.ok === false;
}

/** The contract's verdict as an outcome: the same code and message wherever the rule is checked. */
function failureOf(problem: ContractProblem<FsmErrorCode> | undefined): Failure | undefined {
  return problem === undefined ? undefined : fail(problem.code, problem.message);
}

export function checkRequestId(requestId: string): Failure | undefined {
  return failureOf(contractRequestId(requestId));
}

export function checkClientId(clientId: string): Failure | undefined {
  return failureOf(contractClientId(clientId));
}

/** A namespace in a command is an argument of the command (INVALID_ARGUMENT), not a lock name. */
export function checkNamespaceName(namespace: string): Failure | undefined {
  if (typeof namespace !== 'string' || !isValidNamespace(namespace)) {
    return fail('INVALID_ARGUMENT', `namespace must be 1 to ${NAMESPACE_BYTES_MAX} characters of [A-Za-z0-9._-], not "." or ".."`);
  }
  return undefined;
}

/** A session id is "<namespace>:<unique>" (docs/decisions/0004-sessions-belong-to-one-namespace.md). */
export function checkSessionId(sessionId: string, namespace?: string): Failure | undefined {
  return failureOf(contractSessionId(sessionId, namespace));
}

export function checkTtlMs(ttlMs: number): Failure | undefined {
  if (!Number.isSafeInteger(ttlMs) || ttlMs < TTL_MS_MIN || ttlMs > TTL_MS_MAX) {
    return fail('INVALID_TTL', `ttl_ms must be an integer in [${TTL_MS_MIN}, ${TTL_MS_MAX}], got ${ttlMs}`);
  }
  return undefined;
}

export function checkLockDelayMs(lockDelayMs: number): Failure | undefined {
  if (!Number.isSafeInteger(lockDelayMs) || lockDelayMs < 0 || lockDelayMs > LOCK_DELAY_MS_MAX) {
    return fail(
      'INVALID_ARGUMENT',
      `lock_delay_ms must be an integer in [0, ${LOCK_DELAY_MS_MAX}] (the server caps it), got ${lockDelayMs}`,
    );
  }
  return undefined;
}

export function checkWaitMs(waitMs: number): Failure | undefined {
  if (!Number.isSafeInteger(waitMs) || waitMs < 0 || waitMs > WAIT_MS_MAX) {
    return fail('INVALID_ARGUMENT', `wait_ms must be an integer in [0, ${WAIT_MS_MAX}], got ${waitMs}`);
  }
  return undefined;
}

export function checkMode(mode: LockMode): Failure | undefined {
  if (mode !== 'EXCLUSIVE' && mode !== 'SHARED') return fail('INVALID_MODE', `mode must be EXCLUSIVE or SHARED, got ${String(mode)}`);
  return undefined;
}

export function checkToken(token: number): Failure | undefined {
  if (!Number.isSafeInteger(token) || token < 0) return fail('INVALID_ARGUMENT', `a token is a non-negative integer, got ${token}`);
  return undefined;
}

export function checkName(name: string, namespace?: string): Failure | undefined {
  const problem = validateLockName(name, namespace);
  return problem === undefined ? undefined : fail(problem.code, problem.message);
}

/** checkName for a name that must lie in `namespace` (a valid one): allocates nothing when the name is fine. */
export function checkNameIn(name: string, namespace: string): Failure | undefined {
  return typeof name === 'string' && isLockNameIn(name, namespace) ? undefined : checkName(name, namespace);
}

/** Member ids as the cell node accepts them (the contract's member id format). */
export function checkMemberId(id: string): Failure | undefined {
  return failureOf(contractMemberId(id));
}

/** host:port with a non-empty host of at most 253 characters and no spaces, and a port in 1–65535. */
export function checkHostPort(value: string, what: string): Failure | undefined {
  const m = typeof value === 'string' ? /^([^\s:]{1,253}):(\d{1,5})$/.exec(value) : null;
  return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65535
    ? undefined
    : fail('INVALID_ARGUMENT', `member ${what} must be host:port, got ${JSON.stringify(String(value).slice(0, 300))}`);
}

/**
 * The checks that need no state, in the order the state machine applies them.
 * Undefined when the command may be proposed. ImportNamespace data is checked
 * by the state machine (it needs the cell's limits); see `validateNamespaceExport`.
 */
export function validateCommand(command: Command): Failure | undefined {
  switch (command.kind) {
    case 'OpenSession':
      return (
        checkNamespaceName(command.namespace) ??
        checkSessionId(command.sessionId, command.namespace) ??
        checkClientId(command.clientId) ??
        checkTtlMs(command.ttlMs)
      );
    case 'CloseSession':
    case 'ExpireSession':
      return checkSessionId(command.sessionId);
    case 'Acquire':
      return (
        checkSessionId(command.sessionId) ??
        checkRequestId(command.requestId) ??
        checkName(command.name, namespaceOfSessionId(command.sessionId)) ??
        checkMode(command.mode) ??
        checkWaitMs(command.waitMs) ??
        checkLockDelayMs(command.lockDelayMs)
      );
    case 'Release':
      return (
        checkSessionId(command.sessionId) ?? checkName(command.name, namespaceOfSessionId(command.sessionId)) ?? checkToken(command.token)
      );
    case 'CancelWait':
      return (
        checkSessionId(command.sessionId) ??
        checkRequestId(command.requestId) ??
        checkName(command.name, namespaceOfSessionId(command.sessionId))
      );
    case 'Noop':
      return undefined;
    case 'LiftLockDelay':
      return checkName(command.name) ?? checkToken(command.delayRevision);
    case 'ClaimNamespace':
    case 'ExportNamespace':
      return checkNamespaceName(command.namespace);
    case 'FreezeNamespace':
    case 'UnfreezeNamespace':
    case 'DropNamespace':
    case 'ImportNamespace':
    case 'ImportStagedNamespace':
    case 'StageImportChunk':
      return checkNamespaceName(command.namespace) ?? (command.fence === undefined ? undefined : checkMoveFence(command.fence));
    case 'SetMemberAddress':
      return checkMemberId(command.id) ?? checkHostPort(command.address, 'address') ?? checkHostPort(command.peerAddress, 'peer address');
    case 'ForgetMember':
      return checkMemberId(command.id);
    case 'SetNamespaceQuotas':
      return checkNamespaceName(command.namespace) ?? checkQuotas(command.quotas);
    case 'SetNamespaceCredentials':
      return checkNamespaceName(command.namespace) ?? checkCredentials(command.credentials);
    default:
      return unreachable(command, 'command kind');
  }
}

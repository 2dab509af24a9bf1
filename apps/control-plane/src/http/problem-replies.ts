/**
 * Every error the app answers becomes an RFC 9457 problem document from the
 * catalogue (problems.ts): a handler's ProblemError as it is, fastify's own
 * errors (validation, body size, media type, unknown route) and the meta
 * group's refusals mapped to their codes. Anything else is a bug: logged,
 * answered INTERNAL.
 */
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { FencerError } from '@fencer/base';
import { bodyBytesMax } from '../limits.js';
import { isNotLeader } from '../meta-group.js';
import { PROBLEMS, ProblemError, problemOf, type ProblemCode } from '../problems.js';

export function sendProblem(reply: FastifyReply, code: ProblemCode, detail?: string): FastifyReply {
  return reply.code(PROBLEMS[code].status).type('application/problem+json').send(problemOf(code, detail));
}

type AppError = Error & Partial<Pick<FastifyError, 'statusCode' | 'validation'>>;

/** The problem an error of the meta group or of a cell means, or undefined when it is none of theirs. */
function groupProblemOf(error: AppError): { code: ProblemCode; detail: string } | undefined {
  if (isNotLeader(error))
    return { code: 'NOT_LEADER', detail: `the meta group has no reachable leader right now (${error.message}); retry` };
  if (!(error instanceof FencerError)) return undefined;
  if (error.code === 'TOO_MANY_REQUESTS') return { code: 'RESOURCE_EXHAUSTED', detail: error.message };
  // The write may or may not have been applied: the same Idempotency-Key makes the retry safe either way.
  if (error.code === 'SHUTTING_DOWN' || error.code === 'DEADLINE_EXCEEDED' || error.code === 'OUTCOME_UNKNOWN')
    return { code: 'NOT_LEADER', detail: `${error.message}; retry with the same Idempotency-Key` };
  return undefined;
}

/** The problem of an error fastify raised by HTTP status, or undefined for a 5xx (a bug). */
function httpProblemOf(error: AppError): { code: ProblemCode; detail: string } | undefined {
  const status = error.statusCode ?? 500;
  if (status === 413) return { code: 'PAYLOAD_TOO_LARGE', detail: `bodies are at most ${bodyBytesMax} bytes` };
  if (status === 415) return { code: 'UNSUPPORTED_MEDIA_TYPE', detail: error.message };
  if (status === 404) return { code: 'NOT_FOUND', detail: error.message };
  if (status >= 400 && status < 500) return { code: 'INVALID_REQUEST', detail: error.message };
  return undefined;
}

/** Installs the error and not-found handlers on the root instance, so every route plugin inherits them. */
export function installProblemReplies(app: FastifyInstance): void {
  app.setErrorHandler((error: AppError, request, reply) => {
    if (error instanceof ProblemError) return sendProblem(reply, error.code, error.detail);
    if (error.validation !== undefined) return sendProblem(reply, 'INVALID_REQUEST', error.message);
    const problem = groupProblemOf(error) ?? httpProblemOf(error);
    if (problem !== undefined) return sendProblem(reply, problem.code, problem.detail);
    request.log.error({ err: error }, 'request failed');
    return sendProblem(reply, 'INTERNAL', 'an internal error; it was logged');
  });
  app.setNotFoundHandler((request, reply) => sendProblem(reply, 'NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`));
}

/**
 * Requests are validated against the contract's own JSON schemas
 * (openapi.ts). Extra fields are refused (the contract's
 * additionalProperties: false), never silently dropped. Bodies keep their
 * JSON types; query strings, headers and path params (always strings) are
 * coerced to their schemas' types.
 */
import type { FastifyInstance } from 'fastify';
import { contractAjv, contractSchema } from '../openapi.js';

/** Installs the contract's schemas and validators on the root instance, before any route plugin is registered. */
export function installContractValidation(app: FastifyInstance): void {
  const bodyAjv = contractAjv({ coerceTypes: false });
  const stringAjv = contractAjv({ coerceTypes: true });
  app.addSchema(contractSchema());
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : stringAjv).compile(schema));
}

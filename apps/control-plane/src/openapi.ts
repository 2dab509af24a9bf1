/**
 * The HTTP contract as data: openapi/openapi.yaml (a byte-for-byte copy of
 * the shared contract) parsed once, so the routes take their request and
 * response schemas from it instead of restating them.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';

// ajv-formats is CommonJS: its default export arrives wrapped under nodenext resolution.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

export const openapiPath = fileURLToPath(new URL('../openapi/openapi.yaml', import.meta.url));

export interface OpenApiDoc {
  readonly paths: Record<string, Record<string, unknown>>;
  readonly components: { readonly schemas: Record<string, unknown>; readonly parameters: Record<string, unknown> };
}

export const openapi = parse(readFileSync(openapiPath, 'utf8')) as OpenApiDoc;

/** The id under which fastify (and the tests' ajv) know the contract's component schemas. */
export const CONTRACT_SCHEMA_ID = 'fencer-control-plane';

/**
 * The contract's components as one JSON schema with an $id, its refs made
 * absolute ('#/components/...' → 'fencer-control-plane#/components/...') so a
 * route schema can point into it.
 */
export function contractSchema(): Record<string, unknown> {
  return { $id: CONTRACT_SCHEMA_ID, type: 'object', components: absoluteRefs(openapi.components) };
}

export function absoluteRefs<T>(value: T): T {
  if (Array.isArray(value)) return value.map(absoluteRefs) as T;
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${CONTRACT_SCHEMA_ID}${v}` : absoluteRefs(v);
  return out as T;
}

/** A reference to a component schema, for route schemas. */
export const ref = (name: string): { $ref: string } => ({ $ref: `${CONTRACT_SCHEMA_ID}#/components/schemas/${name}` });

/** The JSON schema of an operation's response with this status and media type, refs made absolute. */
export function responseSchema(path: string, method: string, status: string): unknown {
  const op = openapi.paths[path]?.[method] as
    { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> } | undefined;
  const schema = op?.responses?.[status]?.content?.['application/json']?.schema;
  return schema === undefined ? undefined : absoluteRefs(schema);
}

/** The JSON schema of an operation's request body, refs made absolute. */
export function requestBodySchema(path: string, method: string): unknown {
  const op = openapi.paths[path]?.[method] as { requestBody?: { content?: Record<string, { schema?: unknown }> } } | undefined;
  const schema = op?.requestBody?.content?.['application/json']?.schema;
  return schema === undefined ? undefined : absoluteRefs(schema);
}

/**
 * An ajv that knows the contract's components and formats. Extra fields are
 * refused, never dropped; `coerceTypes` only for parts that arrive as strings
 * (query, params, headers).
 */
export function contractAjv(options: { coerceTypes: boolean; allErrors?: boolean }): Ajv {
  const ajv = new Ajv({
    removeAdditional: false,
    coerceTypes: options.coerceTypes,
    useDefaults: false,
    allErrors: options.allErrors ?? false,
    strict: false,
  });
  addFormats(ajv);
  ajv.addSchema(contractSchema());
  return ajv;
}

/**
 * The pure core (raft, lock-fsm, replica) reads no clock, starts no timer,
 * draws no unseeded randomness and imports no `node:` module. Each pure lib
 * has a test that feeds its sources through this scanner.
 */
export const FORBIDDEN_IN_PURE_CODE: readonly RegExp[] = [
  /\bDate\.now\s*\(/,
  /\bnew\s+Date\s*\(/,
  /\bperformance\.now\s*\(/,
  /\bprocess\.hrtime\b/,
  /\bMath\.random\s*\(/,
  /\bsetTimeout\s*\(/,
  /\bsetInterval\s*\(/,
  /\bsetImmediate\s*\(/,
  /\bqueueMicrotask\s*\(/,
  /from\s+['"]node:/,
  /require\s*\(\s*['"]node:/,
  /import\s*\(\s*['"]node:/,
  /from\s+['"](fs|os|net|http|https|crypto|child_process|worker_threads|dgram|path|timers)['"]/,
];

export interface ForbiddenHit {
  line: number;
  text: string;
}

/** Lines of `source` that use a forbidden token, ignoring `//` line comments. */
export function findForbiddenTokens(source: string): ForbiddenHit[] {
  const hits: ForbiddenHit[] = [];
  const lines = source.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i] ?? '';
    const code = raw.replace(/\/\/.*$/, '');
    if (FORBIDDEN_IN_PURE_CODE.some((re) => re.test(code))) hits.push({ line: i + 1, text: raw.trim() });
  }
  return hits;
}

/**
 * Import specifiers in `source` that are neither relative nor in `allowed`
 * (the pure libs may import each other and nothing third-party).
 */
export function findForeignImports(source: string, allowed: readonly string[]): ForbiddenHit[] {
  const hits: ForbiddenHit[] = [];
  const lines = source.split('\n');
  const spec = /(?:\bfrom\s+|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g;
  for (let i = 0; i < lines.length; i++) {
    const code = (lines[i] ?? '').replace(/\/\/.*$/, '');
    for (const m of code.matchAll(spec)) {
      const target = m[1] ?? '';
      if (target.startsWith('.') || allowed.includes(target)) continue;
      hits.push({ line: i + 1, text: target });
    }
  }
  return hits;
}

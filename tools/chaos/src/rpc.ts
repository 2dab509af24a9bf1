/**
 * The workers' lock-service client: raw contract calls through this worker's
 * own fault proxies, following leader hints (translated from a node's real
 * address to this worker's proxy for it) and retrying retryable codes with
 * the same request. Kept small and explicit (not the SDK) so that the
 * history says exactly what was sent and what came back: each call ends as
 * ok, a definite failure, or unknown.
 */
import { Metadata, credentials, type ServiceError } from '@grpc/grpc-js';
import { ErrorCode, FencerError } from '@fencer/base';
import { fromServiceError, isRetryable, lockservice } from '@fencer/protocol';

type Client = InstanceType<typeof lockservice.LockServiceClient>;
type Unary<Req, Res> = (req: Req, md: Metadata, opts: { deadline: number }, cb: (err: ServiceError | null, res: Res) => void) => unknown;

export type CallResult<Res> =
  | { readonly kind: 'ok'; readonly value: Res; readonly retried: boolean }
  /** A definite answer that is not success (the request did not change anything). */
  | { readonly kind: 'fail'; readonly code: ErrorCode; readonly retried: boolean }
  /** The budget ran out on retryable errors: the request may or may not have been applied. */
  | { readonly kind: 'unknown'; readonly code: ErrorCode };

export interface RpcOptions {
  /** Proxy addresses of this worker, one per node, in node order. */
  readonly endpoints: readonly string[];
  /** A node's advertised address → this worker's proxy for it. */
  readonly hintMap: Readonly<Record<string, string>>;
}

export class Rpc {
  private readonly clients: Client[];
  private target = 0;

  constructor(private readonly opts: RpcOptions) {
    this.clients = opts.endpoints.map(
      (address) =>
        new lockservice.LockServiceClient(address, credentials.createInsecure(), {
          'grpc.keepalive_time_ms': 2_000,
          'grpc.keepalive_timeout_ms': 2_000,
          'grpc.initial_reconnect_backoff_ms': 100,
          'grpc.max_reconnect_backoff_ms': 1_000,
        }),
    );
  }

  get endpointCount(): number {
    return this.clients.length;
  }

  client(i: number): Client {
    return this.clients[i % this.clients.length]!;
  }

  get currentTarget(): number {
    return this.target;
  }

  /** Moves to the node a leader hint names, or to the next node. */
  follow(hint: string | undefined): void {
    const mapped = hint ? this.opts.hintMap[hint] : undefined;
    const at = mapped ? this.opts.endpoints.indexOf(mapped) : -1;
    this.target = at >= 0 ? at : (this.target + 1) % this.clients.length;
  }

  private once<Req, Res>(method: string, req: Req, timeoutMs: number): Promise<Res> {
    const c = this.clients[this.target]! as unknown as Record<string, Unary<Req, Res>>;
    return new Promise((resolve, reject) =>
      c[method]!.call(c, req, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(fromServiceError(err)) : resolve(res),
      ),
    );
  }

  /** One logical call: attempts until a definite answer or the budget runs out. */
  async call<Req, Res>(method: string, req: Req, opts: { attemptMs: number; budgetMs: number }): Promise<CallResult<Res>> {
    const until = Date.now() + opts.budgetMs;
    let retried = false;
    let lastCode: ErrorCode = 'DEADLINE_EXCEEDED';
    for (let attempt = 0; attempt < 1_000; attempt++) {
      try {
        const value = await this.once<Req, Res>(method, req, opts.attemptMs);
        return { kind: 'ok', value, retried };
      } catch (e) {
        const fe = e instanceof FencerError ? e : new FencerError('INTERNAL', String(e));
        if (!isRetryable(fe.code)) return { kind: 'fail', code: fe.code, retried };
        lastCode = fe.code;
        retried = true;
        this.follow(fe.leaderHint);
        if (Date.now() + 50 > until) return { kind: 'unknown', code: lastCode };
        await sleep(Math.min(250, 25 * (attempt + 1)));
      }
    }
    return { kind: 'unknown', code: lastCode };
  }

  close(): void {
    for (const c of this.clients) c.close();
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

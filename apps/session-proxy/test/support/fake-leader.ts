/**
 * A fake cell leader for the proxy's tests: a grpc-js server on 127.0.0.1:0
 * serving CellInternal.HeartbeatBatch; every batch is recorded and answered
 * (or failed) when the test says.
 */
import { Server, ServerCredentials, type ServiceError, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import type { FencerError } from '@fencer/base';
import { internalpb, toServiceError } from '@fencer/protocol';

export type Batch = { sessionIds: string[]; atMs: number; answer(ttlMs: number): void; fail(e: FencerError): void };

/** A fake cell leader: every HeartbeatBatch is recorded and answered by the test. */
export async function fakeLeader(): Promise<{ address: string; batches: Batch[]; next(): Promise<Batch>; close(): Promise<void> }> {
  const batches: Batch[] = [];
  const waiting: ((b: Batch) => void)[] = [];
  const server = new Server();
  server.addService(internalpb.CellInternalService, {
    heartbeatBatch: (
      call: ServerUnaryCall<internalpb.HeartbeatBatchRequest, internalpb.HeartbeatBatchResponse>,
      cb: sendUnaryData<internalpb.HeartbeatBatchResponse>,
    ) => {
      const b: Batch = {
        sessionIds: call.request.sessionIds,
        atMs: performance.now(),
        answer: (ttlMs) =>
          cb(null, { sessions: call.request.sessionIds.map((sessionId) => ({ sessionId, ttlMsRemaining: ttlMs, expired: false })) }),
        fail: (e) => cb(toServiceError(e) as ServiceError),
      };
      batches.push(b);
      waiting.shift()?.(b);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return {
    address: `127.0.0.1:${port}`,
    batches,
    next: () => new Promise((resolve) => waiting.push(resolve)),
    close: () => new Promise((resolve) => server.tryShutdown(() => resolve())),
  };
}

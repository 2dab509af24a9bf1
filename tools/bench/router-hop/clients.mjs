// LockService stubs for the router-hop experiments: one grpc-js client per
// address (no retry buffer), and a promise per unary call with a 30 s deadline.
import { credentials } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';

export function lockClients() {
  const stubs = new Map();
  const stub = (a) => {
    if (!stubs.has(a))
      stubs.set(a, new lockservice.LockServiceClient(a, credentials.createInsecure(), { 'grpc.per_rpc_retry_buffer_size': 0 }));
    return stubs.get(a);
  };
  return {
    /** One unary call of `method` on `address`; resolves with its answer. */
    call: (address, method, req) =>
      new Promise((res, rej) => stub(address)[method](req, { deadline: Date.now() + 30_000 }, (e, r) => (e ? rej(e) : res(r)))),
    close: () => {
      for (const s of stubs.values()) s.close();
    },
  };
}

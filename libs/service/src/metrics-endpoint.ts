/** The Prometheus endpoint of a process: GET /metrics from one registry, on its own HTTP listener. */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

/** Serves GET /metrics from the registry on host:port (port 0 picks one); resolves once listening. */
export function serveMetrics(address: string, registry: Registry): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('not found: try /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (e: Error) => res.writeHead(500).end(e.message),
    );
  });
  const at = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(address.slice(at + 1)), address.slice(0, at), () => resolve(server));
  });
}

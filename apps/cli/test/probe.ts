/**
 * A command for `fencer lock` tests to run: a tiny Node program that connects
 * back to the test over loopback TCP, reports its environment, reports the
 * signals it receives, and exits when the test tells it to. The test waits on
 * these messages (events), never on time.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { EventEmitter } from 'node:events';

const SCRIPT = `
const net = require('net');
const s = net.connect(Number(process.env.PROBE_PORT), '127.0.0.1', () => {
  const env = {};
  for (const k of Object.keys(process.env)) if (k.startsWith('FENCER_')) env[k] = process.env[k];
  s.write(JSON.stringify({ kind: 'env', pid: process.pid, env }) + '\\n');
});
let buf = '';
s.on('data', (d) => {
  buf += d;
  for (let i = buf.indexOf('\\n'); i >= 0; i = buf.indexOf('\\n')) {
    const line = buf.slice(0, i); buf = buf.slice(i + 1);
    if (line.startsWith('exit ')) { s.end(() => process.exit(Number(line.slice(5)))); }
  }
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => {
  s.write(JSON.stringify({ kind: 'signal', signal: sig }) + '\\n');
  if (process.env.PROBE_IGNORE_TERM !== '1') s.end(() => process.exit(sig === 'SIGTERM' ? 143 : 130));
});
setInterval(() => {}, 60000);
`;

export interface ProbeMessage {
  kind: 'env' | 'signal';
  pid?: number;
  env?: Record<string, string>;
  signal?: string;
}

export class Probe extends EventEmitter<{ message: [ProbeMessage] }> {
  private server!: Server;
  private sockets: Socket[] = [];
  readonly messages: ProbeMessage[] = [];
  port = 0;

  static async start(): Promise<Probe> {
    const p = new Probe();
    p.server = createServer((sock) => {
      p.sockets.push(sock);
      let buf = '';
      sock.on('data', (d) => {
        buf += d.toString();
        for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
          const m = JSON.parse(buf.slice(0, i)) as ProbeMessage;
          buf = buf.slice(i + 1);
          p.messages.push(m);
          p.emit('message', m);
        }
      });
      sock.on('error', () => {});
    });
    await new Promise<void>((resolve) => p.server.listen(0, '127.0.0.1', resolve));
    p.port = (p.server.address() as { port: number }).port;
    return p;
  }

  /** argv for `fencer lock … -- <command>`. */
  command(): string[] {
    return [process.execPath, '-e', SCRIPT];
  }

  /** Environment the probe needs. */
  env(ignoreTerm = false): Record<string, string> {
    return { PROBE_PORT: String(this.port), ...(ignoreTerm ? { PROBE_IGNORE_TERM: '1' } : {}) };
  }

  next(kind: ProbeMessage['kind'], timeoutMs = 15_000): Promise<ProbeMessage> {
    const seen = this.messages.find((m) => m.kind === kind && !(m as { taken?: boolean }).taken);
    if (seen) {
      (seen as { taken?: boolean }).taken = true;
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the probe sent no ${kind} message within ${timeoutMs} ms`)), timeoutMs);
      const on = (m: ProbeMessage): void => {
        if (m.kind !== kind) return;
        (m as { taken?: boolean }).taken = true;
        clearTimeout(timer);
        this.off('message', on);
        resolve(m);
      };
      this.on('message', on);
    });
  }

  /** Tells every connected probe to exit with this code. */
  exitAll(code: number): void {
    for (const s of this.sockets) if (!s.destroyed) s.write(`exit ${code}\n`);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

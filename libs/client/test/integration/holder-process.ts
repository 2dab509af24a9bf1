/** Runs holder.mjs as a child process and talks to it in JSON lines (see holder.mjs). */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'holder.mjs');

export interface HolderMessage {
  event: string;
  [key: string]: unknown;
}

export class HolderProcess extends EventEmitter<{ message: [HolderMessage] }> {
  readonly child: ChildProcess;
  private readonly backlog: HolderMessage[] = [];
  stderr = '';

  constructor(env: Record<string, string>) {
    super();
    this.child = spawn(process.execPath, [HOLDER], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let buf = '';
    this.child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const m = JSON.parse(buf.slice(0, i)) as HolderMessage;
        buf = buf.slice(i + 1);
        this.backlog.push(m);
        this.emit('message', m);
      }
    });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
  }

  /** The next message with this event (from the backlog first); rejects if the process exits first. */
  next(event: string, timeoutMs = 30_000): Promise<HolderMessage> {
    const at = this.backlog.findIndex((m) => m.event === event);
    if (at >= 0) return Promise.resolve(this.backlog.splice(at, 1)[0] as HolderMessage);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`holder sent no ${event} within ${timeoutMs} ms; stderr: ${this.stderr}`)), timeoutMs);
      const onExit = (code: number | null): void => done(new Error(`holder exited (${code}) before ${event}; stderr: ${this.stderr}`));
      const on = (m: HolderMessage): void => {
        if (m.event !== event) return;
        this.backlog.splice(this.backlog.indexOf(m), 1);
        done(undefined, m);
      };
      const done = (err?: Error, m?: HolderMessage): void => {
        clearTimeout(timer);
        this.off('message', on);
        this.child.off('exit', onExit);
        if (err) reject(err);
        else resolve(m as HolderMessage);
      };
      this.on('message', on);
      this.child.once('exit', onExit);
    });
  }

  send(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }

  pause(): void {
    this.child.kill('SIGSTOP');
  }

  resume(): void {
    this.child.kill('SIGCONT');
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGCONT');
    this.child.kill('SIGKILL');
    await exited;
  }
}

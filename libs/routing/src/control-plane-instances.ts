/**
 * The instances of the control plane's meta group that a routing source
 * follows: their URLs (`--control-plane URL[,URL...]`), which one is
 * followed now, the move to the next after a fault, and the liveness probe
 * that finds a hung one while a long poll is parked there.
 *
 * Any instance of the meta group (docs/decisions/0009-the-meta-group.md)
 * answers reads and forwards writes, and the routing version is the
 * group's, so a source can continue on another instance from the version
 * in force. One instance is followed at a time; a fault of it (no answer,
 * a timeout, a 5xx) moves the source to the next, round robin.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * Splits `--control-plane`'s value into base URLs: one URL, or several
 * separated by commas (the instances of one meta group). Throws with the
 * reason when an entry is not an http(s) URL a router can follow.
 */
export function parseControlPlaneUrls(list: string): string[] {
  const urls = list.split(',').map((u) => u.trim());
  const seen = new Set<string>();
  for (const u of urls) {
    let url: URL;
    try {
      url = new URL(u);
    } catch {
      throw new Error(`"${u}" is not a URL; give base URLs separated by commas, e.g. http://127.0.0.1:7400,http://127.0.0.1:7401`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`"${u}" is not an http or https URL`);
    if (url.username || url.password) throw new Error(`"${u}" carries credentials; pass the token in FENCER_CONTROL_PLANE_TOKEN`);
    if (seen.has(url.href)) throw new Error(`"${u}" is listed twice`);
    seen.add(url.href);
  }
  return urls;
}

/** One call to a control-plane instance that did not get an answer: a connection error, a timeout or a 5xx. The next instance may do better. */
export class InstanceFault extends Error {}

/** Which instance is followed, with a gauge of it and a counter of moves when given a registry. */
export class FollowedInstance {
  /** Index in `urls` of the instance followed; only moveOn() changes it. */
  private at = 0;
  private readonly followingGauge: Gauge<'url'> | undefined;
  private readonly switches: Counter | undefined;

  constructor(
    readonly urls: readonly string[],
    private readonly logger: Logger,
    registry: Registry | undefined,
  ) {
    if (urls.length === 0) throw new Error('ControlPlaneRoutingSource needs at least one control-plane URL');
    if (registry) {
      const registers = [registry];
      this.followingGauge = new Gauge({
        name: 'fencer_routing_control_plane_following',
        help: 'The control-plane instance whose routing table is followed (1), by base URL; the others listed are 0',
        labelNames: ['url'],
        registers,
      });
      this.switches = new Counter({
        name: 'fencer_routing_control_plane_switches_total',
        help: 'Moves to the next control-plane instance after one failed to answer',
        registers,
      });
      this.showFollowing();
    }
  }

  /** The index of the instance followed now. */
  get index(): number {
    return this.at;
  }

  /** The base URL of the instance followed now. */
  get url(): string {
    return this.urls[this.at]!;
  }

  private showFollowing(): void {
    this.urls.forEach((url, i) => this.followingGauge?.set({ url }, i === this.at ? 1 : 0));
  }

  /**
   * After a fault of instance `from`, follows the next one. A fault seen by a
   * call that started before another call already moved on is ignored, so
   * concurrent failures (the long poll and a refresh) move one step, not two.
   */
  moveOn(from: number, fault: InstanceFault, version: number): void {
    if (this.at !== from || this.urls.length === 1) return;
    this.at = (from + 1) % this.urls.length;
    this.switches?.inc();
    this.showFollowing();
    this.logger.warn(
      { err: fault.message, from: this.urls[from], to: this.urls[this.at], version },
      'control-plane instance did not answer; following the next',
    );
  }
}

/**
 * Asks `baseUrl`'s /v1/health every `everyMs` while a long poll is parked
 * there, and aborts `hung` with an InstanceFault when a probe gets no HTTP
 * answer in time (an answer of any status means the process lives). A
 * process that is hung (stopped, or stuck) keeps its connections open and
 * would hold the poll to its timeout; the probe gives it up at once.
 */
export function probeWhileParked(baseUrl: string, everyMs: number, headers: Record<string, string>): { hung: AbortSignal; stop(): void } {
  const hung = new AbortController();
  const stopped = new AbortController();
  let probing = false;
  const url = new URL('/v1/health', baseUrl);
  const probe = async (): Promise<void> => {
    if (probing) return;
    probing = true;
    try {
      const res = await fetch(url, { signal: AbortSignal.any([stopped.signal, AbortSignal.timeout(everyMs)]), headers });
      await res.body?.cancel();
    } catch (e) {
      if (!stopped.signal.aborted)
        hung.abort(new InstanceFault(`GET ${url.href} (liveness probe while the long poll was parked): ${(e as Error).message}`));
    } finally {
      probing = false;
    }
  };
  const timer = setInterval(() => void probe(), everyMs);
  timer.unref();
  return {
    hung: hung.signal,
    stop: () => {
      clearInterval(timer);
      stopped.abort();
    },
  };
}

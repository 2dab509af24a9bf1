/**
 * Mutual TLS material for a Fencer process: its certificate, key and the
 * CA that signs every peer, read from files, reloaded when a file changes
 * (polled) or on SIGHUP, without a restart. Each certificate names its
 * holder in a URI subject alternative name (tools/scripts/dev-ca.mjs makes
 * them): `fencer://cell/<cell>/<node>`, `fencer://router/<name>`,
 * `fencer://proxy/<name>`, `fencer://control-plane/<name>`,
 * `fencer://operator/<name>`. A server reads the verified peer's identity
 * with `identityOf` and decides by it (a replica takes peer traffic from its
 * own cell only).
 *
 * Reloading: servers built with `serverOptions` get the new context through
 * `onReload` (tls.Server.setSecureContext); a client dials each new
 * connection with the material current then. Connections already open keep
 * the certificate they were made with.
 */
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import tls from 'node:tls';

/** How often the files are looked at for a change (fs.watchFile polls: it sees a file replaced by rename too). */
export const tlsFilePollMs = 1_000;

export interface TlsPaths {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

export interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer;
}

/** What a certificate's URI SAN says its holder is. */
export type PeerIdentity =
  | { readonly kind: 'replica'; readonly cellId: string; readonly nodeId: string }
  | { readonly kind: 'router' | 'proxy' | 'control-plane' | 'operator'; readonly name: string };

const IDENTITY_URI = /^fencer:\/\/(cell|router|proxy|control-plane|operator)\/([A-Za-z0-9._-]+)(?:\/([A-Za-z0-9._-]+))?$/;

/** Parses one `fencer://…` URI; undefined when it is not one. */
export function parseIdentityUri(uri: string): PeerIdentity | undefined {
  const m = IDENTITY_URI.exec(uri);
  if (!m) return undefined;
  const [, kind, first, second] = m;
  if (kind === 'cell') return second === undefined ? undefined : { kind: 'replica', cellId: first!, nodeId: second };
  return second === undefined ? { kind: kind as 'router', name: first! } : undefined;
}

/** The `fencer://` URI SANs of a certificate as Node shows it (`subjectaltname`: "DNS:a, URI:b"). */
export function identitiesOf(cert: Pick<tls.PeerCertificate, 'subjectaltname'> | undefined): PeerIdentity[] {
  const san = cert?.subjectaltname ?? '';
  const out: PeerIdentity[] = [];
  for (const part of san.split(',').map((s) => s.trim())) {
    if (!part.startsWith('URI:')) continue;
    const id = parseIdentityUri(part.slice('URI:'.length));
    if (id) out.push(id);
  }
  return out;
}

/** The verified peer of a TLS socket, by its certificate's first `fencer://` SAN; undefined when unverified or unnamed. */
export function identityOf(socket: tls.TLSSocket): PeerIdentity | undefined {
  if (!socket.authorized) return undefined;
  return identitiesOf(socket.getPeerCertificate())[0];
}

/** A short text of an identity for logs and refusals. */
export function describeIdentity(id: PeerIdentity | undefined): string {
  if (id === undefined) return 'a certificate with no fencer:// name';
  return id.kind === 'replica' ? `replica ${id.nodeId} of cell ${id.cellId}` : `${id.kind} ${id.name}`;
}

export function readTlsMaterial(paths: TlsPaths): TlsMaterial {
  const read = (what: string, file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new Error(`cannot read the TLS ${what} ${file}: ${(err as Error).message}`);
    }
  };
  const material = { cert: read('certificate', paths.cert), key: read('key', paths.key), ca: read('CA', paths.ca) };
  // A bad pair fails here, with the file names, rather than at the first handshake.
  try {
    tls.createSecureContext(material);
  } catch (err) {
    throw new Error(`the TLS files ${paths.cert} / ${paths.key} / ${paths.ca} do not make a usable context: ${(err as Error).message}`);
  }
  return material;
}

/**
 * One process's TLS files, kept current. `start()` begins watching (files
 * polled every tlsFilePollMs, and SIGHUP); a reload that fails keeps the
 * previous material and reports the error.
 */
export class TlsFiles {
  private material: TlsMaterial;
  private readonly listeners = new Set<(m: TlsMaterial) => void>();
  private watching = false;
  private readonly onHup = (): void => this.reload();
  private readonly onChange = (): void => this.reload();

  constructor(
    readonly paths: TlsPaths,
    private readonly onError: (err: Error) => void = () => {},
  ) {
    this.material = readTlsMaterial(paths);
  }

  get current(): TlsMaterial {
    return this.material;
  }

  /** Runs `f` with the new material after each successful reload; returns how to stop. */
  onReload(f: (m: TlsMaterial) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  /** Reads the files again now (what a change or SIGHUP does). */
  reload(): void {
    let next: TlsMaterial;
    try {
      next = readTlsMaterial(this.paths);
    } catch (err) {
      this.onError(err as Error);
      return;
    }
    if (next.cert.equals(this.material.cert) && next.key.equals(this.material.key) && next.ca.equals(this.material.ca)) return;
    this.material = next;
    for (const f of this.listeners) f(next);
  }

  start(): this {
    if (this.watching) return this;
    this.watching = true;
    for (const file of new Set([this.paths.cert, this.paths.key, this.paths.ca]))
      watchFile(file, { interval: tlsFilePollMs }, this.onChange);
    process.on('SIGHUP', this.onHup);
    return this;
  }

  stop(): void {
    if (!this.watching) return;
    this.watching = false;
    for (const file of new Set([this.paths.cert, this.paths.key, this.paths.ca])) unwatchFile(file, this.onChange);
    process.off('SIGHUP', this.onHup);
  }

  /** Options of a server that requires and verifies a client certificate, offering `alpn` protocols. */
  serverOptions(alpn?: readonly string[]): tls.TlsOptions {
    return { ...this.material, requestCert: true, rejectUnauthorized: true, ...(alpn ? { ALPNProtocols: [...alpn] } : {}) };
  }

  /** Options of a client connection presenting this process's certificate and verifying the server's against the CA. */
  clientOptions(alpn?: readonly string[]): tls.ConnectionOptions {
    return { ...this.material, rejectUnauthorized: true, ...(alpn ? { ALPNProtocols: [...alpn] } : {}) };
  }

  /** Keeps a server's context current: each reload sets it (connections already open keep theirs). */
  follow(server: tls.Server): () => void {
    return this.onReload((m) => server.setSecureContext({ ...m }));
  }
}

/** Reads `--tls-cert/--tls-key/--tls-ca` as given: all three or none; throws a message naming what is missing. */
export function tlsPathsOf(o: { tlsCert?: string; tlsKey?: string; tlsCa?: string }): TlsPaths | undefined {
  const given = [o.tlsCert, o.tlsKey, o.tlsCa].filter((v) => v !== undefined && v !== '');
  if (given.length === 0) return undefined;
  if (given.length < 3) throw new Error('--tls-cert, --tls-key and --tls-ca go together: give all three or none');
  return { cert: o.tlsCert!, key: o.tlsKey!, ca: o.tlsCa! };
}

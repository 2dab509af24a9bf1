/**
 * `fencer cell restore`: builds fresh replica data folders for a cell from
 * an object-store snapshot (restore/restore.ts does the work), then prints
 * how to start each replica on its folder.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { BadLocationError, ObjectNotFoundError, SnapshotIntegrityError } from '@fencer/object-store';
import { EXIT } from '../exit-codes.js';
import { defaultRevisionRaise, restoreCell, RestoreError, type RestoreReplica, type RestoreResult } from '../restore/restore.js';
import { count, type CliRun, type GlobalOptions } from '../run-context.js';

interface RestoreOptions {
  from: string;
  cell: string;
  dataDir: string;
  replicas: string;
  peerPortOffset: number;
  bumpRevision?: number;
  s3Endpoint?: string;
  s3Region: string;
  s3PathStyle?: boolean;
}

/** `id=host:port,…`; each peer address is the gRPC port plus the offset, as the cell node derives it. */
export function parseReplicas(spec: string, peerPortOffset: number): RestoreReplica[] {
  const out: RestoreReplica[] = [];
  for (const part of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([A-Za-z0-9._-]+)=([^\s=,]+):(\d{1,5})$/.exec(part);
    if (!m) throw new InvalidArgumentError(`--replicas: "${part}" is not id=host:port`);
    const port = Number(m[3]);
    if (port < 1 || port + peerPortOffset > 65_535)
      throw new InvalidArgumentError(`--replicas: port ${port} + --peer-port-offset is not a port`);
    if (out.some((r) => r.id === m[1])) throw new InvalidArgumentError(`--replicas names ${m[1]} twice`);
    out.push({ id: m[1]!, address: `${m[2]}:${port}`, peerAddress: `${m[2]}:${port + peerPortOffset}` });
  }
  return out;
}

function describe(result: RestoreResult, o: RestoreOptions, replicas: readonly RestoreReplica[]): string {
  const m = result.manifest;
  const peers = replicas.map((r) => `${r.id}=${r.address}`).join(',');
  const lines = [
    `restored cell ${o.cell} from ${result.manifestLocation}`,
    `  snapshot index ${m.index}, term ${m.term}, taken ${m.createdAt}, ${m.bytes} bytes, sha256 ${m.sha256} (checked)`,
    `  revision base ${result.revisionBase.before} -> ${result.revisionBase.after}: every token the cell grants now exceeds ${m.lastRevision + result.revisionBase.after - result.revisionBase.before}`,
    `  voters: ${replicas.map((r) => r.id).join(', ')}`,
    '',
    'start each replica on its folder (add --managed when a control plane assigns namespaces):',
    ...result.folders.map((f) => {
      const r = replicas.find((x) => x.id === f.id)!;
      return `  fencer-cell-node --id ${r.id} --cell-id ${o.cell} --listen ${r.address} --peer-listen ${r.peerAddress} --data-dir ${f.dir} --peers ${peers}`;
    }),
  ];
  return `${lines.join('\n')}\n`;
}

function exitCodeOfRestore(e: unknown): number | undefined {
  if (e instanceof RestoreError || e instanceof SnapshotIntegrityError || e instanceof ObjectNotFoundError) return EXIT.ERROR;
  if (e instanceof BadLocationError) return EXIT.USAGE;
  return undefined;
}

async function runRestore(run: CliRun, o: RestoreOptions, g: GlobalOptions): Promise<number> {
  const replicas = parseReplicas(o.replicas, o.peerPortOffset);
  try {
    const result = await restoreCell({
      from: o.from,
      cell: o.cell,
      dataDir: o.dataDir,
      replicas,
      ...(o.bumpRevision !== undefined ? { bumpRevision: o.bumpRevision } : {}),
      s3: { region: o.s3Region, forcePathStyle: o.s3PathStyle === true, ...(o.s3Endpoint ? { endpoint: o.s3Endpoint } : {}) },
      nowMs: Date.now(),
    });
    run.io.stdout(g.json ? `${JSON.stringify(result)}\n` : describe(result, o, replicas));
    return EXIT.OK;
  } catch (e) {
    const code = exitCodeOfRestore(e);
    if (code === undefined) throw e;
    run.io.stderr(`fencer: restore refused: ${(e as Error).message}\n`);
    return code;
  }
}

export function addRestoreCommand(cell: Command, run: CliRun): void {
  cell
    .command('restore')
    .description(
      "build fresh data folders for a cell's replicas from an object-store snapshot (checksum checked, membership rewritten, revision base raised)",
    )
    .requiredOption(
      '--from <location>',
      's3://bucket/prefix/… or file:///…: a snapshot (.snap or .json), or a store root (the cell’s newest)',
    )
    .requiredOption('--cell <id>', 'the cell being restored (the snapshot must be of it)')
    .requiredOption('--data-dir <dir>', 'each replica gets <dir>/<replica id>, which must be missing or empty')
    .requiredOption('--replicas <list>', 'the new replicas: id=host:port,… (their lock-service addresses)')
    .option(
      '--peer-port-offset <n>',
      "a replica's Raft peer port is its port plus this (the cell node's default)",
      count('--peer-port-offset', 0),
      300,
    )
    .option(
      '--bump-revision <n>',
      `raise the revision base by n instead of the default (snapshot age + 1 h) × 100,000/s + 1,000,000 (e.g. ${defaultRevisionRaise(0, 0)} for a fresh one)`,
      count('--bump-revision', 1),
    )
    .option('--s3-endpoint <url>', 'endpoint of an S3-compatible service')
    .option('--s3-region <region>', 'S3 region', 'us-east-1')
    .option('--s3-path-style', 'path-style S3 URLs (endpoint/bucket/key)')
    .action(async (o: RestoreOptions, cmd: Command) => {
      run.setExitCode(await runRestore(run, o, cmd.optsWithGlobals<GlobalOptions>()));
    });
}

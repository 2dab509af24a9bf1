/**
 * The `fencer` command line, as a function: runCli(argv, io) returns the
 * exit code. main.ts only wires the process to it, so tests run the very same
 * code in-process.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { FencerClient, parseDuration, type FencerClientOptions, type LockInfo } from '@fencer/client';
import { adminpb } from '@fencer/protocol';
import { ConfigError, resolveAdminEndpoints, resolveEndpoints, type EndpointSources } from './config.js';
import { EXIT, EXIT_CODES_HELP, exitCodeFor } from './exit-codes.js';
import { formatEvent, formatLock, formatLockRow, lockJson } from './format.js';
import type { CliIo } from './io.js';
import { runLock } from './commands/lock.js';
import { registerControlPlaneCommands } from './commands/control-plane.js';
import {
  addMember,
  adminCall,
  leaderAmong,
  promoteLearner,
  removeMember,
  statusTimeoutMs,
  takeSnapshot,
  transferLeader,
} from './commands/cell-admin.js';

const duration =
  (flag: string) =>
  (value: string): number => {
    try {
      return parseDuration(value);
    } catch (e) {
      throw new InvalidArgumentError(`${(e as Error).message} (${flag})`);
    }
  };

const count =
  (flag: string, min: number) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min)
      throw new InvalidArgumentError(`${flag} must be an integer >= ${min}, got "${value}"`);
    return n;
  };

interface GlobalOptions extends EndpointSources {
  json?: boolean;
  timeout: number;
}

const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let exitCode: number = EXIT.OK;
  // One interrupt for the whole run: Ctrl-C, SIGTERM, or the test's signal.
  const interrupt = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    if (!interrupt.signal.aborted) interrupt.abort(sig);
  };
  const onIoAbort = (): void => onSignal('SIGINT');
  io.signal?.addEventListener('abort', onIoAbort, { once: true });
  if (io.handleProcessSignals) for (const s of SIGNALS) process.on(s, onSignal);

  const clientOptions = (g: GlobalOptions): FencerClientOptions => {
    const { endpoints, proxies } = resolveEndpoints(g, io.env, io.cwd);
    return { retryBudgetMs: g.timeout, ...io.clientOptions, endpoints, proxies };
  };
  const print = (g: GlobalOptions, json: unknown, human: string): void => {
    io.stdout(g.json ? `${JSON.stringify(json)}\n` : human);
  };
  /** Runs a command body with a client, mapping errors to exit codes. */
  const withClient = async (g: GlobalOptions, body: (c: FencerClient) => Promise<number>): Promise<number> => {
    const client = new FencerClient(clientOptions(g));
    try {
      return await body(client);
    } finally {
      await client.close();
    }
  };

  const program = new Command('fencer')
    .description('Fencer: distributed locks with fencing tokens.')
    .option('--endpoints <list>', 'lock service endpoints, host:port[,host:port…] (default: $FENCER_ENDPOINTS, then .fencer/fleet.json)')
    .option('--fleet <file>', 'fleet description to read endpoints from (default: $FENCER_FLEET, then .fencer/fleet.json here or above)')
    .option('--json', 'machine-readable output: one JSON object per line')
    .addOption(
      new Option('--timeout <duration>', 'how long each call keeps retrying while the cell is unavailable')
        .default(30_000, '30s')
        .argParser(duration('--timeout')),
    )
    .addHelpText('after', EXIT_CODES_HELP)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout(s), writeErr: (s) => io.stderr(s) });

  program
    .command('lock')
    .description('run a command while holding a lock; it gets FENCER_LOCK_NAME and FENCER_LOCK_TOKEN, and is stopped if the lock is lost')
    .argument('<name>', 'lock name, /ls/<namespace>/<name>')
    .argument('[command...]', 'the command and its arguments, after --')
    .option('--shared', 'take the lock in shared mode (many holders)')
    .addOption(
      new Option('--wait <duration>', 'how long to wait for the lock; 0 fails at once when held')
        .default(30_000, '30s')
        .argParser(duration('--wait')),
    )
    .addOption(new Option('--ttl <duration>', 'session TTL (the cell clamps it)').default(12_000, '12s').argParser(duration('--ttl')))
    .addOption(
      new Option('--grace <duration>', 'grace period of a session in jeopardy before the lock counts as lost')
        .default(45_000, '45s')
        .argParser(duration('--grace')),
    )
    .option('--strict', 'stop the command already when the session enters jeopardy')
    .addOption(
      new Option('--kill-after <duration>', 'after SIGTERM, wait this long before SIGKILL')
        .default(10_000, '10s')
        .argParser(duration('--kill-after')),
    )
    .addOption(
      new Option('--lock-delay <duration>', 'if this session expires holding the lock, the cell holds it back this long')
        .default(0, '0s')
        .argParser(duration('--lock-delay')),
    )
    .option('--client-id <id>', 'name of this holder for operators (default host/pid)')
    .option('-q, --quiet', 'print only warnings and errors')
    .addHelpText('after', '\nExample:\n  fencer lock /ls/jobs/nightly --wait 0 -- ./run-nightly.sh --full\n')
    .action(async (name: string, command: string[], o: Record<string, unknown>, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      if (command.length === 0) {
        cmd.error('fencer lock: give the command to run after --, e.g. fencer lock /ls/jobs/x -- ./job.sh', {
          exitCode: EXIT.USAGE,
          code: 'fencer.missingCommand',
        });
      }
      exitCode = await runLock(
        {
          name,
          command,
          shared: o['shared'] === true,
          waitMs: o['wait'] as number,
          ttlMs: o['ttl'] as number,
          graceMs: o['grace'] as number,
          strict: o['strict'] === true,
          killAfterMs: o['killAfter'] as number,
          lockDelayMs: o['lockDelay'] as number,
          clientId: o['clientId'] as string | undefined,
          json: g.json === true,
          quiet: o['quiet'] === true,
        },
        clientOptions(g),
        io,
        interrupt.signal,
      );
    });

  program
    .command('get')
    .description('show one lock: holders with their tokens, and the FIFO queue')
    .argument('<name>', 'lock name, /ls/<namespace>/<name>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      exitCode = await withClient(g, async (c) => {
        const r = await c.getLock(name);
        print(g, lockJson(r.lock, r.revision), formatLock(r.lock, r.revision));
        return EXIT.OK;
      });
    });

  program
    .command('list')
    .description('list the live locks under a prefix')
    .argument('<prefix>', 'prefix inside one namespace, e.g. /ls/payments/')
    .addOption(new Option('--limit <n>', 'list at most n locks').argParser(count('--limit', 1)))
    .action(async (prefix: string, o: { limit?: number }, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      exitCode = await withClient(g, async (c) => {
        const locks: LockInfo[] = [];
        for await (const l of c.listAllLocks(prefix)) {
          if (o.limit !== undefined && locks.length >= o.limit) break;
          locks.push(l);
        }
        if (g.json) for (const l of locks) io.stdout(`${JSON.stringify(lockJson(l))}\n`);
        else io.stdout(locks.length === 0 ? `no live locks under ${prefix}\n` : locks.map(formatLockRow).join(''));
        return EXIT.OK;
      });
    });

  program
    .command('watch')
    .description('follow the events of a lock, or of every lock under a prefix (ending in /), until interrupted')
    .argument('<nameOrPrefix>', 'lock name, or a prefix ending in /')
    .addOption(new Option('--since <revision>', 'events after this revision (default: current state first)').argParser(count('--since', 0)))
    .addOption(new Option('--count <n>', 'exit after n events (progress events not counted)').argParser(count('--count', 1)))
    .option('--progress', 'also print progress events')
    .action(async (target: string, o: { since?: number; count?: number; progress?: boolean }, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      exitCode = await withClient(g, async (c) => {
        let n = 0;
        try {
          for await (const e of c.watch(target, { sinceRevision: o.since ?? 0, signal: interrupt.signal })) {
            if (e.type === 'progress' && !o.progress) continue;
            print(g, e, formatEvent(e));
            if (e.type !== 'progress' && o.count !== undefined && ++n >= o.count) break;
          }
        } catch (e) {
          if (!interrupt.signal.aborted) throw e;
        }
        return EXIT.OK;
      });
    });

  const cell = program.command('cell').description('cell operations');
  cell
    .command('status')
    .description("each replica's role, term, log indexes and replication lag (admin API)")
    .option('--admin <list>', 'admin endpoints, host:port[,…] (default: $FENCER_ADMIN_ENDPOINTS, then the fleet description)')
    .action(async (o: { admin?: string }, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      exitCode = await cellStatus(resolveAdminEndpoints(o.admin, g, io.env, io.cwd), g, io);
    });
  const adminOption = (): Option =>
    new Option('--admin <list>', 'admin endpoints, host:port[,…] (default: $FENCER_ADMIN_ENDPOINTS, then the fleet description)');
  const adminCtx = (o: { admin?: string }, cmd: Command) => {
    const g = cmd.optsWithGlobals<GlobalOptions>();
    return { replicas: resolveAdminEndpoints(o.admin, g, io.env, io.cwd), timeoutMs: g.timeout, json: g.json === true, io };
  };
  cell
    .command('add-member')
    .description(
      'add a replica to the cell, one at a time: its addresses are replicated first, then the membership change (a learner catches up without voting; promote it after)',
    )
    .argument('<id>', "the new member's node id (its --id)")
    .argument('<address>', 'its lock-service gRPC address, host:port (its --listen)')
    .option('--learner', 'join as a non-voting learner (recommended: promote once it has caught up)')
    .option('--peer-address <host:port>', "its Raft peer address (its --peer-listen; default: the gRPC port + the cell's peer port offset)")
    .addOption(adminOption())
    .action(async (id: string, address: string, o: { learner?: boolean; peerAddress?: string; admin?: string }, cmd: Command) => {
      exitCode = await addMember(adminCtx(o, cmd), id, address, o);
    });
  for (const [name, description, run] of [
    ['remove-member', 'remove a replica from the cell', removeMember],
    ['promote', 'make a learner a voter', promoteLearner],
  ] as const) {
    cell
      .command(name)
      .description(description)
      .argument('<id>', "the member's node id")
      .addOption(adminOption())
      .action(async (id: string, o: { admin?: string }, cmd: Command) => {
        exitCode = await run(adminCtx(o, cmd), id);
      });
  }
  cell
    .command('transfer-leader')
    .description('hand leadership to a voter (default: the most up-to-date one), as before maintenance of the leader')
    .argument('[id]', 'the voter to lead next')
    .addOption(adminOption())
    .action(async (id: string | undefined, o: { admin?: string }, cmd: Command) => {
      exitCode = await transferLeader(adminCtx(o, cmd), id);
    });
  cell
    .command('snapshot')
    .description('take a snapshot now and compact the log below it')
    .option('--replica <id>', 'on this replica (default: the leader)')
    .addOption(adminOption())
    .action(async (o: { replica?: string; admin?: string }, cmd: Command) => {
      exitCode = await takeSnapshot(adminCtx(o, cmd), o.replica);
    });

  registerControlPlaneCommands(program, io, (code) => (exitCode = code));

  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') exitCode = EXIT.OK;
      else exitCode = e.code === 'fencer.missingCommand' ? EXIT.USAGE : e.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    } else if (e instanceof ConfigError) {
      io.stderr(`fencer: ${e.message}\n`);
      exitCode = EXIT.CONFIG;
    } else {
      const code = (e as { code?: string }).code;
      io.stderr(`fencer: ${(e as Error).message}${code ? ` (${code})` : ''}\n`);
      exitCode = exitCodeFor(e);
    }
  } finally {
    io.signal?.removeEventListener('abort', onIoAbort);
    if (io.handleProcessSignals) for (const s of SIGNALS) process.off(s, onSignal);
  }
  return exitCode;
}

interface ReplicaRow {
  id: string;
  cellId: string;
  admin: string;
  reachable: boolean;
  status?: adminpb.StatusResponse;
  lag?: number;
}

async function cellStatus(
  replicas: readonly { id: string; admin: string; cellId: string }[],
  g: GlobalOptions,
  io: CliIo,
): Promise<number> {
  const answers = await Promise.all(
    replicas.map((r) =>
      adminCall<adminpb.StatusResponse>(r.admin, 'status', {}, Math.min(g.timeout, statusTimeoutMs)).catch(() => undefined),
    ),
  );
  const rows: ReplicaRow[] = replicas.map((r, i) => {
    const s = answers[i];
    return {
      id: s?.nodeId || r.id,
      cellId: s?.cellId || r.cellId,
      admin: r.admin,
      reachable: s !== undefined,
      ...(s ? { status: s } : {}),
    };
  });
  // Lag as the leader sees it: its last index minus each member's match index.
  const leader = leaderAmong(rows);
  for (const r of rows) {
    const m = leader?.status?.members.find((x) => x.id === r.id);
    if (m) r.lag = m.state === 'self' ? 0 : m.lag;
    else if (r === leader) r.lag = 0;
  }
  if (g.json) {
    io.stdout(
      `${JSON.stringify({
        leaderId: leader?.status?.nodeId ?? null,
        term: leader?.status?.term ?? null,
        replicas: rows.map((r) => ({
          id: r.id,
          cellId: r.cellId,
          admin: r.admin,
          reachable: r.reachable,
          role: r.status?.role ?? null,
          term: r.status?.term ?? null,
          leaderId: r.status?.leaderId ?? null,
          commitIndex: r.status?.commitIndex ?? null,
          appliedIndex: r.status?.appliedIndex ?? null,
          lastIndex: r.status?.lastIndex ?? null,
          snapshotIndex: r.status?.snapshotIndex ?? null,
          lag: r.lag ?? null,
        })),
      })}\n`,
    );
  } else {
    const cellIds = [...new Set(rows.map((r) => r.cellId).filter((c) => c !== ''))];
    io.stdout(
      `${cellIds.length ? `cell ${cellIds.join(', ')}  ` : ''}${leader ? `leader ${leader.id} (term ${leader.status!.term})` : 'no leader reachable'}\n`,
    );
    const header = ['replica', 'role', 'term', 'commit', 'applied', 'last', 'lag'];
    const table = rows.map((r) =>
      r.status
        ? [
            r.id,
            r.status.role,
            String(r.status.term),
            String(r.status.commitIndex),
            String(r.status.appliedIndex),
            String(r.status.lastIndex),
            r.lag === undefined ? '?' : String(r.lag),
          ]
        : [r.id, 'unreachable', '', '', '', '', ''],
    );
    const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => (row[i] as string).length)));
    for (const row of [header, ...table])
      io.stdout(
        `${row
          .map((c, i) => c.padEnd(widths[i] as number))
          .join('  ')
          .trimEnd()}\n`,
      );
  }
  return rows.some((r) => r.reachable) ? EXIT.OK : EXIT.UNAVAILABLE;
}

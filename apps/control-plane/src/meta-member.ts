/**
 * This instance's member of the meta group: its log (the WAL in
 * --data-dir), the group over it, the TCP peer transport that carries its
 * Raft messages to the other members, and the peer port that takes theirs.
 */
import { randomBytes } from 'node:crypto';
import { type Clock, SeededRandom } from '@fencer/base';
import { noopGroupMetrics } from '@fencer/group';
import { TcpPeerServer, TcpPeerTransport, kindsOf } from '@fencer/peer-transport';
import type { TlsFiles } from '@fencer/service';
import { MetaGroup } from '@fencer/meta-fsm/group';
import type { Die, Logger } from '@fencer/service';
import { openRaftLogStore, type WalStore } from '@fencer/wal';
import { NodeDisk } from '@fencer/wal/node';
import type { ControlPlaneConfig } from './config.js';
import type { ControlPlaneMetrics } from './metrics.js';
import { metaPeerChecks } from './peer-intake.js';

/** The peer transport checks every batch's group id: the meta group's is this, never a cell's. */
const META_GROUP_ID = 'fencer-meta';
/** Raft messages queued per peer link before the oldest are dropped (Raft resends what matters). */
const PEER_SEND_QUEUE_MAX = 4096;
const PEER_RECONNECT_DELAY_MS = 100;

export interface MetaMemberEnv {
  readonly logger: Logger;
  readonly metrics: ControlPlaneMetrics;
  readonly clock: Clock;
  /** The process's exit for a storage failure or a port it cannot open. */
  readonly die: Die;
}

export interface MetaMember {
  readonly group: MetaGroup;
  /** Stops the peer transport and the peer port, then closes the group's log. */
  close(): Promise<void>;
}

/** Opens the log, builds the group and joins the other members; resolves once the peer port listens. */
export async function startMetaMember(config: ControlPlaneConfig, env: MetaMemberEnv, tls?: TlsFiles): Promise<MetaMember> {
  const { logger, metrics, die } = env;
  const store = await openLog(config.dataDir, die);
  if (store.recovery.truncatedAt) logger.warn({ truncatedAt: store.recovery.truncatedAt }, 'recovery cut a torn tail off the log');
  // The transport reports unreachable peers to the group, which sends through the transport: the group is
  // built right after, before any peer is set, so the callback never runs before it exists.
  const transport = new TcpPeerTransport({
    selfId: config.id,
    cellId: META_GROUP_ID,
    sendQueueMax: PEER_SEND_QUEUE_MAX,
    reconnectDelayMs: PEER_RECONNECT_DELAY_MS,
    logger,
    onUnreachable: (peer) => group.replica.reportUnreachable(peer),
    onConnectionLost: (peer) => group.replica.reportConnectionLost(peer),
    // Under TLS the meta group's members are control planes: a link takes no other server.
    ...(tls ? { tls, tlsAccepts: kindsOf('control-plane') } : {}),
  });
  const group = new MetaGroup(
    {
      id: config.id,
      peers: new Map([...config.peers.keys()].map((id) => [id, config.urls.get(id)!])),
      raft: { electionTicks: config.electionTicks },
      snapshotEveryEntries: config.snapshotEveryEntries,
    },
    store,
    {
      clock: env.clock,
      random: new SeededRandom(randomBytes(6).readUIntBE(0, 6)),
      send: (messages) => transport.send(messages),
      logger,
      metrics: { ...noopGroupMetrics, replica: metrics.replica },
      onFatal: (err) => die('storage failure (fsync is never retried): exiting', err),
      after: (ms, run) => {
        const timer = setTimeout(run, ms);
        return () => clearTimeout(timer);
      },
    },
  );
  for (const [id, address] of config.peers) if (id !== config.id) transport.setPeer(id, address);
  // The peer port takes Raft messages only from the meta group's members and the leader it follows (peer-intake.ts).
  const peerChecks = metaPeerChecks(group, config.peers, (reason) => metrics.peerRefused(reason));
  const peerServer = new TcpPeerServer(META_GROUP_ID, (m) => group.receive(m), logger, {
    ...peerChecks,
    ...(tls ? { tls, tlsAccepts: kindsOf('control-plane') } : {}),
  });
  metrics.watchTerm(() => group.replica.status().term);
  await peerServer.listen(config.peerListen).catch((err: unknown) => die(`cannot listen for peers on ${config.peerListen}`, err));
  return {
    group,
    async close() {
      transport.close();
      await peerServer.close();
      await new Promise<void>((resolve) => group.close((err) => (err ? die('closing the log failed', err) : resolve())));
    },
  };
}

function openLog(dataDir: string, die: Die): Promise<WalStore> {
  return new Promise((resolve) =>
    openRaftLogStore(new NodeDisk(), dataDir, {}, (err, s) => {
      if (err || !s) die(`cannot open the meta group's log in ${dataDir}`, err);
      resolve(s);
    }),
  );
}

/**
 * @fencer/peer-transport: how nodes talk to each other below the client
 * contract. Raft peer links (TCP frames, or the gRPC stream with
 * `--peer-transport grpc`) with the intake check every peer port applies
 * before the Raft core sees a message, and the lane (routers' and
 * followers' unary calls as TCP frames on a node's client port). Both
 * framings are read by one length-prefix decoder. It does I/O, so it is not
 * pure; its bounds are in limits.ts.
 */
export * as limits from './limits.js';
export { splitAddress } from './address.js';
export type { PeerLogger } from './logger.js';
export { LengthPrefixDecoder, type Decoded, type Framing } from './length-prefix.js';

export { messageFromWire, messageToWire } from './peer-codec.js';
export { type PeerIntake, StreamRefusal, admitsSender, takeBatch } from './intake.js';
export { RefusalLog } from './refusal-log.js';
export { BatchingLink, LinkedPeerTransport, closedByPeer, type PeerTransportOptions, type RaftPeerTransport } from './batching-link.js';
export {
  type PeerServerChecks,
  TcpPeerServer,
  TcpPeerTransport,
  encodePeerFrame,
  peerFrameDecoder,
  peerFrameHeaderBytes,
} from './tcp-peer-transport.js';
export { GrpcPeerTransport, raftTransportHandlers, raftTransportService } from './grpc-peer-transport.js';

export { LANE_MAGIC, LANE_METHODS, type LaneMethod } from './lane-frames.js';
export { type LaneDispatch, type LaneOutcome, type MuxOptions, type MuxedPort, listenMuxed } from './lane-server.js';
export { LaneClient, LaneConnectionLost, type LaneResult } from './lane-client.js';

export {
  ALPN,
  type AcceptsIdentity,
  type GrpcTlsPort,
  type IdentityByPeer,
  type TlsListenOptions,
  anyReplica,
  checkServerIdentity,
  createTlsListener,
  dialTls,
  grpcChannelCredentials,
  kindsOf,
  listenGrpcTls,
  listenOn,
  replicaOfCell,
} from './tls-links.js';

/**
 * What other apps reuse of the cell node: its TCP peer transport (the
 * control plane's meta group sends its Raft messages the same way).
 */
export { TcpPeerServer, TcpPeerTransport } from './tcp-peer-transport.js';
export type { PeerTransportOptions, RaftPeerTransport } from './peer-transport.js';
export { type PeerIntake, StreamRefusal, admitsSender } from './peer-codec.js';

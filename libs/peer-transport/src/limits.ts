/**
 * Every bound of the peer links and the lane, each with its reason, and how
 * they relate (asserted when the module loads). Knobs a node's command line
 * sets (a link's send queue, its reconnect delay) are options of the
 * transports; these are the bounds nothing configures.
 */
import { assert } from '@fencer/base';
import { raftLimits } from '@fencer/raft';

/** What a u32 length prefix can say: no frame limit may be above it. */
const lengthPrefixMax = 0xffff_ffff;

// ------------------------------------------------------------ Raft peer links

/**
 * Largest RaftBatch a link sends (gRPC's send limit) and the largest TCP
 * frame payload a peer port accepts: a batch of snapshot chunks or entries,
 * with room to spare.
 */
export const peerBatchBytesMax = 64 * 1024 * 1024;

/** Bytes buffered in a TCP peer socket (unsent) before the link counts as blocked and drops new messages. */
export const peerSocketBufferBytesMax = 8 * 1024 * 1024;

/** TCP and HTTP/2 keepalive on a peer link: a peer that vanished without a FIN is noticed after about this long. */
export const peerKeepaliveMs = 10_000;

/** How long a gRPC peer link waits for the answer to a keepalive ping before it counts the link broken. */
export const grpcPeerKeepaliveTimeoutMs = 5_000;

/** grpc-js's reconnect backoff on a gRPC peer link, first and longest: a restarted peer is back within a second. */
export const grpcPeerReconnectBackoffMs = 100;
export const grpcPeerReconnectBackoffMsMax = 1_000;

/** A gRPC peer port acknowledges every this many batches of a Send call (the acknowledgement carries the count only). */
export const grpcPeerAckBatches = 1024;

/** One warning per this many ms at most, per refusing peer server (refusal-log.ts). */
export const refusalLogWindowMs = 10_000;

// ------------------------------------------------------------ the lane

/** The largest lane frame payload either side accepts (grpc-js's default receive limit). */
export const laneFrameBytesMax = 4 * 1024 * 1024;

/** Calls one lane connection may have in flight at a node; beyond, TOO_MANY_REQUESTS. */
export const laneCallsMax = 10_000;

/**
 * How long a caller waits for PONG before it drops a connection that went
 * silent. A node answers PING from its event loop at once, so a live one
 * answers within this unless its loop stalls that long; a false drop costs
 * a reconnect and resent calls (an Acquire keeps its request_id), while a
 * frozen leader holds its callers this long past laneSilenceProbeMs (the
 * partition failover of docs/benchmarks.md: 1 s here left the router
 * behind the new leader's election).
 */
export const laneProbeTimeoutMs = 500;
/**
 * A connection with calls waiting and nothing received for this long is
 * asked PING as well, not only at a call's deadline: a node frozen with its
 * sockets open (a partition, a machine stopped dead) is dropped within this
 * plus laneProbeTimeoutMs, and its callers look for the new leader
 * (docs/decisions/0021-crash-detection-by-the-transport.md). Held Acquires
 * keep a healthy connection silent too; they cost one PING per this period.
 */
export const laneSilenceProbeMs = 300;

/** How long a new connection on a muxed port may take to show which protocol it speaks. */
export const laneSniffTimeoutMs = 10_000;

/** How long a caller waits for the node's handshake before it drops the connection. */
export const laneConnectTimeoutMs = 2_000;

/** How long a caller stays off the lane of a node that did not answer the handshake (a node upgraded in place gains it). */
export const laneUnsupportedRetryMs = 60_000;

/** The longest delay a Node timer holds; setTimeout fires at once past it. */
export const timerDelayMsMax = 2 ** 31 - 1;

assert(peerBatchBytesMax <= lengthPrefixMax && laneFrameBytesMax <= lengthPrefixMax, 'frame limits fit the u32 length prefix');
assert(peerBatchBytesMax >= raftLimits.bytesPerMsgMax, 'a TCP peer frame can carry the largest AppendEntries the core sends');
assert(peerSocketBufferBytesMax < peerBatchBytesMax, 'a blocked link is noticed before a whole batch limit of bytes waits unsent');
assert(grpcPeerReconnectBackoffMs <= grpcPeerReconnectBackoffMsMax, 'the reconnect backoff starts at or below its longest');
assert(grpcPeerKeepaliveTimeoutMs < peerKeepaliveMs, 'a keepalive answer is awaited for less than the keepalive period');
assert(laneSilenceProbeMs < laneProbeTimeoutMs, 'silence is checked more often than a PING is waited for');
assert(laneProbeTimeoutMs < laneUnsupportedRetryMs, 'a silent node is dropped long before a node without the lane is tried again');
assert(laneConnectTimeoutMs < laneSniffTimeoutMs, 'a caller gives up on the handshake before the node gives up sniffing');

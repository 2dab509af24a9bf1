/**
 * Where each member of the group listens: its client (gRPC) address and its
 * peer address. Starts from the configured peers and learns from the
 * replicated directory (SetMemberAddress / ForgetMember entries, applied on
 * every replica alike), so every replica, and whoever leads later, can reach
 * a member added at run time. The state machine keeps the replicated map;
 * this keeps what the node dials and tells clients.
 */
import type { NodeId } from '@fencer/base';

export interface MemberDirectoryOptions {
  /** Node id → client address of the members this node starts with. */
  readonly peers: ReadonlyMap<NodeId, string>;
  /** The peer address of a member at a client address, unless the directory names one (throws when there is none). */
  readonly defaultPeerAddress: (address: string) => string;
}

export class MemberDirectory {
  /** Node id → client address: the configured peers, then the replicated directory. */
  readonly addresses: Map<NodeId, string>;
  /** Node id → peer address, for members the replicated directory names. */
  private readonly peerAddresses = new Map<NodeId, string>();
  /** Told when a member's addresses become known or change (the peer transport dials it). */
  onAddress: ((id: NodeId, address: string) => void) | undefined;

  constructor(private readonly options: MemberDirectoryOptions) {
    this.addresses = new Map(options.peers);
  }

  addressOf(id: NodeId): string | undefined {
    return this.addresses.get(id);
  }

  /** The member whose client address this is, if known (leader hints name addresses). */
  idOf(address: string): NodeId | undefined {
    for (const [id, a] of this.addresses) if (a === address) return id;
    return undefined;
  }

  /** Where a member listens for peer traffic: the directory's address, else the default for its client address. */
  peerAddressOf(id: NodeId): string | undefined {
    const known = this.peerAddresses.get(id);
    if (known !== undefined) return known;
    const address = this.addresses.get(id);
    return address === undefined ? undefined : this.options.defaultPeerAddress(address);
  }

  defaultPeerAddress(address: string): string {
    return this.options.defaultPeerAddress(address);
  }

  /** A member's addresses, from the replicated directory. */
  learn(id: NodeId, address: string, peerAddress: string): void {
    if (this.addresses.get(id) === address && this.peerAddresses.get(id) === peerAddress) return;
    this.addresses.set(id, address);
    this.peerAddresses.set(id, peerAddress);
    this.onAddress?.(id, address);
  }

  /** The directory forgot a removed member's peer address (its client address stays for leader hints in flight). */
  forget(id: NodeId): void {
    this.peerAddresses.delete(id);
  }
}

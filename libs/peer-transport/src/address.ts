/** host:port addresses: the one parser for every address a peer link or the lane dials or listens on. */

/** Splits host:port (an IPv6 host in brackets); throws, naming the address, for anything else. */
export function splitAddress(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(at + 1));
  if (at <= 0 || address.slice(at + 1) === '' || !Number.isInteger(port) || port < 0 || port > 65_535)
    throw new Error(`"${address}" is not host:port`);
  return { host, port };
}

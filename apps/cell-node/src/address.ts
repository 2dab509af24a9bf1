/** host:port addresses: splitting them, and the default TCP peer address of a member. */

export function splitAddress(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(at + 1));
  if (at <= 0 || address.slice(at + 1) === '' || !Number.isInteger(port) || port < 0 || port > 65_535)
    throw new Error(`"${address}" is not host:port`);
  return { host, port };
}

/** The address with its port moved by `offset` (a member's TCP peer address is its gRPC address shifted so). */
export function shiftPort(address: string, offset: number): string {
  const { host, port } = splitAddress(address);
  const shifted = port + offset;
  if (shifted < 1 || shifted > 65_535)
    throw new Error(`${address} with its port moved by ${offset} is not a port: give --peer-listen and --peer-dial`);
  return `${host.includes(':') ? `[${host}]` : host}:${shifted}`;
}

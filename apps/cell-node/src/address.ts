/** The default TCP peer address of a member: its client address with the port moved by --peer-port-offset. */
import { splitAddress } from '@fencer/peer-transport';

/** The address with its port moved by `offset` (a member's TCP peer address is its gRPC address shifted so). */
export function shiftPort(address: string, offset: number): string {
  const { host, port } = splitAddress(address);
  const shifted = port + offset;
  if (shifted < 1 || shifted > 65_535)
    throw new Error(`${address} with its port moved by ${offset} is not a port: give --peer-listen and --peer-dial`);
  return `${host.includes(':') ? `[${host}]` : host}:${shifted}`;
}

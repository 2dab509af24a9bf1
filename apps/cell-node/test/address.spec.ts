/**
 * Goal: a member's default TCP peer address is its client address with the
 * port moved by --peer-port-offset, IPv6 hosts kept in brackets; an offset
 * that moves the port out of range, or an address that is not host:port,
 * is refused with a message that says what to give instead.
 * Method: shiftPort over literal addresses.
 */
import { describe, expect, it } from 'vitest';
import { shiftPort } from '../src/address.js';

describe('peer addresses', () => {
  it('moves a port by the offset and refuses what is not host:port', () => {
    expect(shiftPort('127.0.0.1:7001', 300)).toBe('127.0.0.1:7301');
    expect(shiftPort('[::1]:7001', 300)).toBe('[::1]:7301');
    expect(() => shiftPort('127.0.0.1:65400', 300)).toThrow(/not a port: give --peer-listen and --peer-dial/);
    expect(() => shiftPort('localhost', 300)).toThrow(/not host:port/);
  });
});

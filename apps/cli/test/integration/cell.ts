/** The shared test cell (tools/fleet/test-cell.mjs): a real five-replica cell on free 127.0.0.1 ports. */
export { startTestCell as startCell, type TestCell as Cell } from '@fencer/fleet/testing';

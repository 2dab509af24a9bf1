/**
 * Goal: the routing table has one parser that refuses what a router cannot
 * route by (with a message naming where and why), one writer whose output
 * the parser reads back unchanged, and one placement rule that the control
 * plane and a router's auto-tenants share.
 * Method: tables as literal JSON values; round trips through the writer;
 * placement on small hand-made loads, each case naming the tie it breaks.
 */
import { describe, expect, it } from 'vitest';
import {
  CELLS_MAX,
  REPLICAS_PER_CELL_MAX,
  ROUTES_MAX,
  RoutingFormatError,
  isHostPort,
  leastLoadedCell,
  namespacesPerCell,
  parseCells,
  parseRoutes,
  parseRoutingFile,
  routingFileJson,
  routingObject,
} from '../src/index.js';

const cells = [
  { id: 'cell-1', replicas: ['127.0.0.1:7001', '127.0.0.1:7002'] },
  { id: 'cell-2', replicas: ['127.0.0.1:7011'] },
];
const file = (version: number, routes: Record<string, string>): unknown => ({
  version,
  cells,
  routes: Object.entries(routes).map(([namespace, cell]) => ({ namespace, cell, state: 'active' })),
});
/** The placement rule as a router with a routing file applies it: no session counts. */
const placeOnFile = (version: number, routes: Record<string, string>): string | undefined => {
  const t = parseRoutingFile(file(version, routes), 'f');
  return leastLoadedCell(t.cells.values(), namespacesPerCell(t.routes.values()));
};

describe('parseRoutingFile', () => {
  it('reads cells and routes, and refuses what a router cannot route by', () => {
    const t = parseRoutingFile(file(3, { payments: 'cell-2' }), 'f');
    expect(t.version).toBe(3);
    expect(t.routes.get('payments')).toEqual({ namespace: 'payments', cell: 'cell-2', state: 'active' });
    expect(t.cells.get('cell-1')!.replicas).toEqual(['127.0.0.1:7001', '127.0.0.1:7002']);
    for (const [bad, why] of [
      [{ version: -1, cells, routes: [] }, /version/],
      [{ version: 1, cells, routes: [{ namespace: 'a/b', cell: 'cell-1' }] }, /namespace/],
      [{ version: 1, cells, routes: [{ namespace: 'a', cell: 'cell-9' }] }, /does not list/],
      [
        {
          version: 1,
          cells,
          routes: [
            { namespace: 'a', cell: 'cell-1' },
            { namespace: 'a', cell: 'cell-2' },
          ],
        },
        /twice/,
      ],
      [{ version: 1, cells: [{ id: 'c', replicas: ['nope'] }], routes: [] }, /host:port/],
      [{ version: 1, cells, routes: [{ namespace: 'a', cell: 'cell-1', state: 'gone' }] }, /state/],
    ] as const) {
      expect(() => parseRoutingFile(bad, 'f')).toThrow(RoutingFormatError);
      expect(() => parseRoutingFile(bad, 'f')).toThrow(why);
    }
  });

  it('holds every list to its limit, and names the place of a bad entry', () => {
    const many = (n: number): { namespace: string; cell: string }[] =>
      Array.from({ length: n }, (_, i) => ({ namespace: `ns-${i}`, cell: 'cell-1' }));
    expect(() => parseRoutes({ version: 1, routes: many(ROUTES_MAX + 1) }, 'w')).toThrow(/more than 100000 routes/);
    expect(parseRoutes({ version: 1, routes: many(3) }, 'w').routes.size).toBe(3);
    const cellList = (n: number): unknown[] => Array.from({ length: n }, (_, i) => ({ id: `c${i}`, replicas: ['h:1'] }));
    expect(() => parseCells(cellList(CELLS_MAX + 1), 'w')).toThrow(/more than 256 cells/);
    const replicas = Array.from({ length: REPLICAS_PER_CELL_MAX + 1 }, (_, i) => `h:${i + 1}`);
    expect(() => parseCells([{ id: 'c', replicas }], 'w')).toThrow(/replicas must list 1-16/);
    expect(() => parseCells([{ id: 'c', replicas: [] }], 'w')).toThrow(/replicas must list/);
    expect(() => parseRoutes({ version: 1, routes: [{ namespace: 'ok' }, 7] }, 'GET /v1/routing')).toThrow(
      /GET \/v1\/routing: routes\[0\]\.cell/,
    );
    expect(() => parseRoutes([], 'w')).toThrow(/expected an object/);
  });

  it('takes GET /v1/fleet replicas as objects with a grpc address, and a route with no state as active', () => {
    const fleet = parseCells([{ id: 'cell-1', replicas: [{ id: 'r1', grpc: '[::1]:7001', role: 'leader' }] }], 'GET /v1/fleet');
    expect(fleet.get('cell-1')!.replicas).toEqual(['[::1]:7001']);
    expect(parseRoutes({ version: 0, routes: [{ namespace: 'a', cell: 'c' }] }, 'w').routes.get('a')!.state).toBe('active');
    expect(isHostPort('127.0.0.1:6001')).toBe(true);
    expect(isHostPort('localhost')).toBe(false);
  });
});

describe('the writer', () => {
  it('writes a routing file the parser reads back to the same table, routes sorted by namespace', () => {
    const t = parseRoutingFile(file(4, { zeta: 'cell-1', alpha: 'cell-2' }), 'f');
    const text = routingFileJson(t);
    expect((JSON.parse(text) as { routes: { namespace: string }[] }).routes.map((r) => r.namespace)).toEqual(['alpha', 'zeta']);
    const back = parseRoutingFile(JSON.parse(text), 'f');
    expect(back.version).toBe(4);
    expect([...back.cells.values()]).toEqual([...t.cells.values()]);
    expect(new Map([...back.routes].sort())).toEqual(new Map([...t.routes].sort()));
  });

  it('writes the contract Routing object with only its fields, in the order given', () => {
    const routes = [
      { namespace: 'b', cell: 'cell-1', state: 'moving' as const, extra: 1 },
      { namespace: 'a', cell: 'cell-2', state: 'active' as const },
    ];
    expect(routingObject(9, routes)).toEqual({
      version: 9,
      routes: [
        { namespace: 'b', cell: 'cell-1', state: 'moving' },
        { namespace: 'a', cell: 'cell-2', state: 'active' },
      ],
    });
  });
});

describe('leastLoadedCell: where a new tenant goes', () => {
  it('places a new namespace on the cell with the fewest namespaces', () => {
    expect(placeOnFile(1, { a: 'cell-1' })).toBe('cell-2');
    expect(placeOnFile(1, { a: 'cell-2' })).toBe('cell-1');
  });

  it('weighs live sessions first, then namespaces, then the smallest id', () => {
    const ns = new Map([
      ['a', 5],
      ['b', 1],
    ]);
    // Fewer sessions wins over fewer namespaces.
    expect(
      leastLoadedCell(
        [
          { id: 'a', sessions: 10 },
          { id: 'b', sessions: 20 },
        ],
        ns,
      ),
    ).toBe('a');
    // Equal sessions: fewer namespaces.
    expect(
      leastLoadedCell(
        [
          { id: 'a', sessions: 10 },
          { id: 'b', sessions: 10 },
        ],
        ns,
      ),
    ).toBe('b');
    // Equal on both: the smallest id, whatever the order listed.
    expect(leastLoadedCell([{ id: 'c' }, { id: 'b' }], new Map())).toBe('b');
    expect(leastLoadedCell([], new Map())).toBeUndefined();
  });

  it('counts namespaces per cell from routes', () => {
    expect(namespacesPerCell([{ cell: 'x' }, { cell: 'y' }, { cell: 'x' }])).toEqual(
      new Map([
        ['x', 2],
        ['y', 1],
      ]),
    );
  });
});

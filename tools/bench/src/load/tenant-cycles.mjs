// Lock cycles spread over tenants: client i opens its session in tenant
// i mod T (through the fleet's router, which routes each tenant to its
// cell) and runs acquire+release on its own name, closed loop. With the
// tenants placed round robin over the cells, every cell gets its share.
import { closedLoop } from './closed-loop.mjs';
import { cycle } from './lock-cycles.mjs';
import { pool } from '../measure.mjs';

/** Sessions are opened this many at a time. */
const SESSION_OPEN_WIDTH = 64;
/** TTL of the load's sessions: longer than any measured window. */
const SESSION_TTL_S = 300;

/** Which tenant client i uses: round robin, so T tenants get clients/T each. */
export function tenantOfClient(i, tenants) {
  return tenants[i % tenants.length];
}

/** Opens one session per client in its tenant; resolves with [{ session, name }] per client. */
export function openTenantClients(fleet, clients, tenants, tag) {
  return pool(clients, SESSION_OPEN_WIDTH, async (i) => {
    const ns = tenantOfClient(i, tenants);
    return { session: await fleet.openSessionIn(ns, SESSION_TTL_S), name: `/ls/${ns}/${tag}/c${i}` };
  });
}

export async function closeTenantClients(list) {
  await pool(list.length, SESSION_OPEN_WIDTH, (i) => list[i].session.close());
}

/** Acquire+release cycles of `clients` clients spread over `tenants`: the closed loop's figures. */
export async function tenantCycles(fleet, clients, tenants, opts) {
  const list = await openTenantClients(fleet, clients, tenants, `spread${clients}`);
  try {
    return await closedLoop(fleet, clients, opts, (i) => cycle(list[i].session, list[i].name));
  } finally {
    await closeTenantClients(list);
  }
}

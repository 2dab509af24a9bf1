/**
 * The read-only views: Fleet, Tenants, a tenant's live locks, Moves and
 * Snapshots. Each renders one part of the latest event; none keeps state.
 */
import type { CellRow, FleetEvent, Health, LocksEvent, MoveRow, SnapshotRow, TenantRow } from '@fencer/dashboard-ui';
import { against, ago, bytes, num, over } from './format.js';

function Dot({ health }: { health: Health }) {
  return <span class={`dot ${health}`} role="img" aria-label={health} />;
}

function CellCard({ cell }: { cell: CellRow }) {
  return (
    <div class="cell" data-cell={cell.id} aria-label={`cell ${cell.id}`} role="group">
      <h3>
        <Dot health={cell.health} />
        {cell.id}
        <span class="muted">
          {' '}
          leader <strong data-leader>{cell.leader ?? 'none'}</strong> · term {num(cell.term)} · {cell.leaderChangesLastHour} leader changes
          in the last hour · {cell.namespaces.length} tenants
        </span>
      </h3>
      <table>
        <thead>
          <tr>
            <th scope="col">replica</th>
            <th scope="col">role</th>
            <th scope="col">term</th>
            <th scope="col">commit</th>
            <th scope="col">applied</th>
            <th scope="col">lag</th>
            <th scope="col">last seen</th>
          </tr>
        </thead>
        <tbody>
          {cell.replicas.map((r) => (
            <tr key={r.id} data-replica={r.id}>
              <td>
                <Dot health={r.health} />
                {r.id}
              </td>
              <td data-role class={r.health}>
                {r.role}
              </td>
              <td>{num(r.term)}</td>
              <td>{num(r.commitIndex)}</td>
              <td>{num(r.appliedIndex)}</td>
              <td>{r.role === 'leader' ? '–' : num(r.lag)}</td>
              <td>{r.lastSeenMs === undefined ? 'never' : `${ago(r.lastSeenMs)} ago`}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function FleetView({ fleet }: { fleet: FleetEvent }) {
  return (
    <section aria-labelledby="fleet-h">
      <h2 id="fleet-h">Fleet</h2>
      <div class="cells">
        {fleet.cells.map((c) => (
          <CellCard key={c.id} cell={c} />
        ))}
      </div>
    </section>
  );
}

function Quota({ used, quota }: { used: number | undefined; quota: number | undefined }) {
  return <td class={over(used, quota) ? 'over' : ''}>{against(used, quota)}</td>;
}

function TenantLine({ t, selected, onSelect }: { t: TenantRow; selected: boolean; onSelect: (ns: string) => void }) {
  return (
    <tr data-tenant={t.namespace}>
      <td>{t.namespace}</td>
      <td data-tenant-cell>{t.cell}</td>
      <td>{t.owner ?? '–'}</td>
      <Quota used={t.usage?.sessions} quota={t.quotas.maxSessions} />
      <Quota used={t.usage?.locks} quota={t.quotas.maxLocks} />
      <Quota used={t.usage?.waiters} quota={t.quotas.maxWaiters} />
      <td>{t.moving ? 'moving' : ''}</td>
      <td>
        <button type="button" aria-pressed={selected} onClick={() => onSelect(t.namespace)}>
          Show locks of {t.namespace}
        </button>
      </td>
    </tr>
  );
}

export function TenantsView(props: { tenants: readonly TenantRow[]; selected: string | null; onSelect: (ns: string) => void }) {
  return (
    <section aria-labelledby="tenants-h">
      <h2 id="tenants-h">Tenants</h2>
      {props.tenants.length === 0 ? (
        <p class="muted">No tenants.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">namespace</th>
              <th scope="col">cell</th>
              <th scope="col">owner</th>
              <th scope="col">sessions / quota</th>
              <th scope="col">locks / quota</th>
              <th scope="col">waiters / quota</th>
              <th scope="col">move</th>
              <th scope="col">live locks</th>
            </tr>
          </thead>
          <tbody>
            {props.tenants.map((t) => (
              <TenantLine key={t.namespace} t={t} selected={props.selected === t.namespace} onSelect={props.onSelect} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function LocksView({ namespace, locks }: { namespace: string; locks: LocksEvent | null }) {
  const current = locks?.namespace === namespace ? locks : null;
  return (
    <section aria-labelledby="locks-h" data-locks-of={namespace}>
      <h2 id="locks-h">Live locks of {namespace}</h2>
      <p class="muted">
        {current === null
          ? 'Watching…'
          : `on cell ${current.cell ?? 'unknown'} · revision ${current.revision} · ${current.locks.length} locks`}
      </p>
      {current?.problem ? <p class="problem">{current.problem}</p> : null}
      {current !== null && current.locks.length > 0 ? (
        <table>
          <thead>
            <tr>
              <th scope="col">lock</th>
              <th scope="col">holders (session · client · token)</th>
              <th scope="col">queue, head first</th>
            </tr>
          </thead>
          <tbody>
            {current.locks.map((l) => (
              <tr key={l.name} data-lock={l.name}>
                <td>
                  <code>{l.name}</code>
                </td>
                <td>
                  {l.holders.map((h) => (
                    <div key={h.sessionId} data-holder={h.sessionId}>
                      {h.sessionId} · {h.clientId || '–'} · token <strong data-token>{h.token}</strong> ({h.mode})
                    </div>
                  ))}
                </td>
                <td>
                  <ol>
                    {l.waiters.map((w) => (
                      <li key={w.sessionId}>
                        {w.sessionId} · {w.clientId || '–'} ({w.mode})
                      </li>
                    ))}
                  </ol>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

function MoveLine({ m, nowMs }: { m: MoveRow; nowMs: number }) {
  const tookMs = (m.finishedAtMs ?? nowMs) - m.createdAtMs;
  return (
    <tr data-move={m.id} data-move-state={m.state}>
      <td>{m.namespace}</td>
      <td>
        {m.fromCell} → {m.toCell}
      </td>
      <td class={m.state === 'failed' ? 'down' : m.state === 'done' ? 'ok' : 'degraded'}>{m.state}</td>
      <td>{num(m.sessions)}</td>
      <td>{num(m.locks)}</td>
      <td>{ago(tookMs)}</td>
      <td>{m.unavailableMs === undefined ? '–' : `${m.unavailableMs} ms`}</td>
      <td>{m.error ?? ''}</td>
    </tr>
  );
}

export function MovesView({ moves, nowMs }: { moves: readonly MoveRow[]; nowMs: number }) {
  const running = moves.filter((m) => m.state !== 'done' && m.state !== 'failed');
  const history = moves.filter((m) => m.state === 'done' || m.state === 'failed');
  const table = (rows: readonly MoveRow[], label: string) => (
    <table aria-label={label}>
      <thead>
        <tr>
          <th scope="col">namespace</th>
          <th scope="col">from → to</th>
          <th scope="col">state</th>
          <th scope="col">sessions</th>
          <th scope="col">locks</th>
          <th scope="col">time</th>
          <th scope="col">unavailable</th>
          <th scope="col">error</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((m) => (
          <MoveLine key={m.id} m={m} nowMs={nowMs} />
        ))}
      </tbody>
    </table>
  );
  return (
    <section aria-labelledby="moves-h">
      <h2 id="moves-h">Moves</h2>
      <h3>Running</h3>
      {running.length === 0 ? <p class="muted">None.</p> : table(running, 'running moves')}
      <h3>History</h3>
      {history.length === 0 ? <p class="muted">None.</p> : table(history, 'finished moves')}
    </section>
  );
}

export function SnapshotsView({ snapshots, nowMs }: { snapshots: readonly SnapshotRow[]; nowMs: number }) {
  return (
    <section aria-labelledby="snapshots-h">
      <h2 id="snapshots-h">Snapshots</h2>
      {snapshots.length === 0 ? (
        <p class="muted">No snapshot taken yet.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">cell</th>
              <th scope="col">last snapshot</th>
              <th scope="col">state</th>
              <th scope="col">age</th>
              <th scope="col">index</th>
              <th scope="col">size</th>
            </tr>
          </thead>
          <tbody>
            {snapshots.map((s) => (
              <tr key={s.cell} data-snapshot-cell={s.cell}>
                <td>{s.cell}</td>
                <td>
                  <code>{s.id}</code>
                </td>
                <td class={s.state === 'failed' ? 'down' : s.state === 'done' ? 'ok' : 'degraded'}>{s.state}</td>
                <td>{ago(nowMs - s.createdAtMs)}</td>
                <td>{num(s.index)}</td>
                <td>{bytes(s.bytes)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

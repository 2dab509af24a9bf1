/** The page's controls that change something or ask for something: the token form and starting a move. */
import { useState } from 'preact/hooks';
import type { CellRow, TenantRow } from '@fencer/dashboard-ui';

export function TokenForm({ detail, onToken }: { detail: string; onToken: (token: string) => void }) {
  const [value, setValue] = useState('');
  return (
    <section aria-labelledby="token-h">
      <h2 id="token-h">Sign in</h2>
      <p>This control plane requires a token: the admin token sees the whole fleet, a tenant token its own tenant.</p>
      {detail ? <p class="problem">{detail}</p> : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (value.trim() !== '') onToken(value.trim());
        }}
      >
        <label>
          Token
          <input type="password" autocomplete="off" size={60} value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        </label>
        <button type="submit">Sign in</button>
      </form>
    </section>
  );
}

interface ProblemBody {
  readonly title?: string;
  readonly detail?: string;
}

async function postMove(token: string | null, namespace: string, toCell: string): Promise<string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() };
  if (token) headers['authorization'] = `Bearer ${token}`;
  const res = await fetch('/v1/moves', { method: 'POST', headers, body: JSON.stringify({ namespace, toCell }) });
  const body = (await res.json().catch(() => ({}))) as ProblemBody & { id?: string };
  if (!res.ok) throw new Error(`${body.title ?? res.status}: ${body.detail ?? res.statusText}`);
  return `Move ${body.id ?? ''} of ${namespace} to ${toCell} started.`;
}

/** Pick a tenant and a target cell, then confirm; the move is then followed in the Moves view. */
export function MoveForm({ tenants, cells, token }: { tenants: readonly TenantRow[]; cells: readonly CellRow[]; token: string | null }) {
  const [namespace, setNamespace] = useState('');
  const [toCell, setToCell] = useState('');
  const [confirming, setConfirming] = useState(false);
  const [message, setMessage] = useState('');
  const tenant = tenants.find((t) => t.namespace === namespace);
  const targets = cells.filter((c) => c.id !== tenant?.cell);
  const ready = tenant !== undefined && targets.some((c) => c.id === toCell);
  const start = async () => {
    setConfirming(false);
    try {
      setMessage(await postMove(token, namespace, toCell));
      setNamespace('');
      setToCell('');
    } catch (e) {
      setMessage((e as Error).message);
    }
  };
  return (
    <section aria-labelledby="move-h">
      <h2 id="move-h">Move a tenant</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (ready) setConfirming(true);
        }}
      >
        <label>
          Tenant to move
          <select value={namespace} onChange={(e) => setNamespace(e.currentTarget.value)}>
            <option value="">choose…</option>
            {tenants.map((t) => (
              <option key={t.namespace} value={t.namespace}>
                {t.namespace} (on {t.cell})
              </option>
            ))}
          </select>
        </label>
        <label>
          Target cell
          <select value={toCell} onChange={(e) => setToCell(e.currentTarget.value)}>
            <option value="">choose…</option>
            {targets.map((c) => (
              <option key={c.id} value={c.id}>
                {c.id}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={!ready}>
          Move…
        </button>
      </form>
      {confirming ? (
        <div role="dialog" aria-labelledby="confirm-h" aria-modal="false">
          <p id="confirm-h">
            Move <strong>{namespace}</strong> from {tenant?.cell} to <strong>{toCell}</strong>? Its sessions and locks are carried over; the
            tenant refuses writes for a moment while it switches.
          </p>
          <button type="button" onClick={() => void start()}>
            Confirm move
          </button>{' '}
          <button type="button" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </div>
      ) : null}
      <p role="status">{message}</p>
    </section>
  );
}

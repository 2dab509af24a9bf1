/**
 * The dashboard app: follows the control plane's event stream (stream.ts)
 * and renders the latest `fleet` and `locks` events. Selecting a tenant
 * reopens the stream with `?namespace=`, so the server watches that
 * tenant's cell. A refused token shows the sign-in form.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { FleetEvent, LocksEvent, StreamEventName, StreamProblem } from '@fencer/dashboard-ui';
import { MoveForm, TokenForm } from './actions.js';
import { follow } from './stream.js';
import { FleetView, LocksView, MovesView, SnapshotsView, TenantsView } from './views.js';

const TOKEN_KEY = 'fencer-dashboard-token';
/** The server says whether it wants a token (a meta tag in the page). */
const AUTH_REQUIRED = document.querySelector('meta[name="fencer-auth"]')?.getAttribute('content') === 'required';
const STREAM_URL = '/v1/dashboard/events';

interface Connection {
  readonly fleet: FleetEvent | null;
  readonly locks: LocksEvent | null;
  /** Why the views may be stale, or ''. */
  readonly problem: string;
  /** Set when the server refused the token. */
  readonly refused: string | null;
}

function useStream(token: string | null, namespace: string | null, onRefused: () => void): Connection {
  const [conn, setConn] = useState<Connection>({ fleet: null, locks: null, problem: '', refused: null });
  useEffect(() => {
    if (AUTH_REQUIRED && token === null) {
      setConn((c) => ({ ...c, refused: '' }));
      return undefined;
    }
    const abort = new AbortController();
    const url = namespace === null ? STREAM_URL : `${STREAM_URL}?namespace=${encodeURIComponent(namespace)}`;
    void follow(
      url,
      token,
      {
        onEvent: (name, data) => {
          if (name === ('fleet' satisfies StreamEventName))
            setConn((c) => ({ ...c, fleet: data as FleetEvent, problem: '', refused: null }));
          else if (name === ('locks' satisfies StreamEventName)) setConn((c) => ({ ...c, locks: data as LocksEvent }));
          else if (name === ('problem' satisfies StreamEventName)) setConn((c) => ({ ...c, problem: (data as StreamProblem).detail }));
        },
        onRefused: (_status, detail) => {
          setConn((c) => ({ ...c, refused: detail }));
          onRefused();
        },
        onBroken: (detail) => setConn((c) => ({ ...c, problem: detail })),
      },
      abort.signal,
    );
    return () => abort.abort();
  }, [token, namespace]);
  return conn;
}

function Header({ fleet, problem }: { fleet: FleetEvent | null; problem: string }) {
  const who = fleet === null ? '' : fleet.scope.admin ? 'admin view' : `tenant ${fleet.scope.namespace}`;
  const instance =
    fleet === null ? 'Connecting…' : `served by ${fleet.instance.id} (${fleet.instance.leader ? 'meta leader' : 'follower'})`;
  return (
    <header>
      <h1>Fencer fleet</h1>
      <p class="status" role="status">
        {instance}
        {who ? ` · ${who}` : ''}
        {fleet ? ` · routing v${fleet.routingVersion}` : ''}
      </p>
      {problem ? <p class="problem">{problem}</p> : null}
    </header>
  );
}

function App() {
  const [token, setToken] = useState<string | null>(sessionStorage.getItem(TOKEN_KEY));
  const [selected, setSelected] = useState<string | null>(null);
  const conn = useStream(token, selected, () => sessionStorage.removeItem(TOKEN_KEY));
  const fleet = conn.fleet;
  if (conn.refused !== null)
    return (
      <>
        <Header fleet={null} problem="" />
        <main>
          <TokenForm
            detail={token === null ? '' : conn.refused}
            onToken={(t) => {
              sessionStorage.setItem(TOKEN_KEY, t);
              setToken(t);
            }}
          />
        </main>
      </>
    );
  return (
    <>
      <Header fleet={fleet} problem={conn.problem} />
      {fleet === null ? null : (
        <main>
          {fleet.scope.admin ? <FleetView fleet={fleet} /> : null}
          <TenantsView tenants={fleet.tenants} selected={selected} onSelect={setSelected} />
          {selected !== null ? <LocksView namespace={selected} locks={conn.locks} /> : null}
          <MovesView moves={fleet.moves} nowMs={fleet.atMs} />
          {fleet.scope.admin ? <MoveForm tenants={fleet.tenants} cells={fleet.cells} token={token} /> : null}
          <SnapshotsView snapshots={fleet.snapshots} nowMs={fleet.atMs} />
        </main>
      )}
    </>
  );
}

// The server's shell (a heading, "Connecting…") painted before this ran: the app replaces it.
const root = document.getElementById('app')!;
root.replaceChildren();
render(<App />, root);

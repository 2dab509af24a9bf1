/**
 * The moves mode's nemesis: a move loop per moving tenant (POST /v1/moves
 * to the other cell, wait for done or failed, again), and a fault loop that
 * hits the source cell, the target cell and the meta group while they move:
 * kill -9 (restarted 0.5-4 s later), SIGSTOP (0.5-5 s) or a cut from the
 * rest of its group (1-6 s), of the group's leader half the time, else of
 * another member. At most one faulty member per group at once, so every
 * group keeps a quorum and every move can finish once its faults heal.
 */
import { assert, type Random } from '@fencer/base';
import { appendFileSync } from 'node:fs';
import type { FleetGroup, MovesFleet } from './moves-fleet.js';

export type MovesFaultKind = 'kill' | 'pause' | 'isolate';
export const MOVES_FAULT_KINDS: readonly MovesFaultKind[] = ['kill', 'pause', 'isolate'];

/** What a fault hit, as the move under way saw the group then. */
export type FaultRole = 'source' | 'target' | 'meta' | 'idle cell';

export interface MovesFaultRecord {
  readonly t: number;
  readonly phase: 'start' | 'heal';
  readonly kind: MovesFaultKind;
  readonly group: string;
  readonly role: FaultRole;
  readonly victim: string;
  readonly leader: boolean;
  readonly durationMs?: number;
}

export interface MoveOutcome {
  readonly id: string;
  readonly namespace: string;
  readonly fromCell: string;
  readonly toCell: string;
  readonly state: string;
  readonly error?: string;
  readonly unavailableMs?: number;
  readonly sessions?: number;
  readonly locks?: number;
  /** Milliseconds from the POST to the terminal state. */
  readonly tookMs: number;
}

interface MoveBody {
  id: string;
  namespace: string;
  fromCell: string;
  toCell: string;
  state: string;
  error?: string;
  unavailableMs?: number;
  sessions?: number;
  locks?: number;
}

/** A move that does not end within this long after its faults stop is reported stuck. */
export const MOVE_END_MS_MAX = 120_000;
const HTTP_TIMEOUT_MS = 5_000;
const POLL_MS = 200;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One HTTP call to the control plane; status 0 when the instance does not answer. */
export async function cpHttp(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  try {
    const res = await fetch(new URL(path, url), {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  } catch (e) {
    return { status: 0, body: { detail: (e as Error).message } };
  }
}

/** GET from whichever instance answers 200 first, trying them in turn until `untilMs` (undefined after). */
export async function cpGet<T>(urls: readonly string[], path: string, untilMs: number): Promise<T | undefined> {
  for (let round = 0; Date.now() < untilMs; round++) {
    const res = await cpHttp(urls[round % urls.length]!, 'GET', path);
    if (res.status === 200) return res.body as T;
    await sleep(POLL_MS);
  }
  return undefined;
}

/** POST /v1/tenants, retried across instances while the meta group or the cell is not ready; a 409 naming the same cell is the first try's record. */
export async function createTenant(urls: readonly string[], namespace: string, cell: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (let round = 0; ; round++) {
    const res = await cpHttp(urls[round % urls.length]!, 'POST', '/v1/tenants', { namespace, cell });
    if (res.status === 201) return;
    if (res.status === 409) {
      const got = await cpGet<{ cell: string }>(urls, `/v1/tenants/${namespace}`, until);
      if (got?.cell === cell) return;
    }
    if ((res.status !== 503 && res.status !== 0) || Date.now() > until)
      throw new Error(`creating tenant ${namespace} on ${cell}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
    await sleep(POLL_MS);
  }
}

export interface MovesNemesisOptions {
  readonly fleet: MovesFleet;
  readonly random: Random;
  /** Tenants moved back and forth between the two cells. */
  readonly tenants: readonly string[];
  readonly intervalMs: readonly [number, number];
  readonly kinds: readonly MovesFaultKind[];
  readonly scheduleFile: string;
  readonly t0Ms: number;
  readonly log: (line: string) => void;
}

export class MovesNemesis {
  readonly records: MovesFaultRecord[] = [];
  readonly moves: MoveOutcome[] = [];
  readonly started: Record<string, number> = {};
  /** Moves not terminal within MOVE_END_MS_MAX, and refusals the move loop did not expect. */
  readonly problems: string[] = [];
  /** The move under way per tenant (from → to), for the role of each fault. */
  private readonly current = new Map<string, { from: string; to: string }>();
  private readonly faulty = new Set<string>();
  private stopAtMs = 0;

  constructor(private readonly o: MovesNemesisOptions) {
    assert(o.intervalMs[0] > 0 && o.intervalMs[0] <= o.intervalMs[1], 'nemesis interval is a range');
    assert(o.kinds.length > 0 || o.tenants.length > 0, 'the nemesis does something');
  }

  /** Moves and faults until `untilMs`; then every fault is healed and each tenant's last move has ended. */
  async run(untilMs: number): Promise<void> {
    this.stopAtMs = untilMs;
    const faults = this.o.kinds.length > 0 ? this.faultLoop(untilMs) : Promise.resolve();
    const movers = this.o.tenants.map((ns) => this.moveLoop(ns, untilMs));
    await faults;
    await Promise.all(movers);
  }

  private roleOf(group: FleetGroup): FaultRole {
    if (group.id === 'meta') return 'meta';
    const moving = [...this.current.values()];
    if (moving.some((m) => m.from === group.id)) return 'source';
    if (moving.some((m) => m.to === group.id)) return 'target';
    return 'idle cell';
  }

  private record(r: MovesFaultRecord): void {
    this.records.push(r);
    appendFileSync(this.o.scheduleFile, `${JSON.stringify(r)}\n`);
  }

  private async faultLoop(untilMs: number): Promise<void> {
    const heals: Promise<void>[] = [];
    while (Date.now() < untilMs) {
      await sleep(this.o.random.range(this.o.intervalMs[0], this.o.intervalMs[1]));
      if (Date.now() >= untilMs) break;
      const free = this.o.fleet.groups.filter((g) => !this.faulty.has(g.id));
      if (free.length === 0) continue;
      heals.push(this.fault(this.o.random.pick(free), this.o.random.pick(this.o.kinds)));
    }
    await Promise.all(heals);
    this.o.fleet.healLinks();
  }

  /** One fault on one member of `group`, healed after its duration; resolves once healed. */
  private async fault(group: FleetGroup, kind: MovesFaultKind): Promise<void> {
    this.faulty.add(group.id);
    try {
      const fleet = this.o.fleet;
      const leader = this.o.random.chance(0.5) ? await fleet.leaderOf(group) : undefined;
      const victim = leader ?? this.o.random.pick(group.members);
      const role = this.roleOf(group);
      const durationMs =
        kind === 'kill'
          ? this.o.random.range(500, 4_000)
          : kind === 'pause'
            ? this.o.random.range(500, 5_000)
            : this.o.random.range(1_000, 6_000);
      const base = { kind, group: group.id, role, victim, leader: victim === leader };
      this.record({ t: Date.now() - this.o.t0Ms, phase: 'start', ...base, durationMs });
      this.started[`${kind} ${role}${base.leader ? ' leader' : ''}`] =
        (this.started[`${kind} ${role}${base.leader ? ' leader' : ''}`] ?? 0) + 1;
      if (kind === 'kill') await fleet.kill(victim);
      else if (kind === 'pause') fleet.pause(victim);
      else fleet.isolate(group, victim);
      await sleep(durationMs);
      if (kind === 'kill') fleet.spawn(victim);
      else if (kind === 'pause') fleet.resume(victim);
      else fleet.healLinks(group);
      this.record({ t: Date.now() - this.o.t0Ms, phase: 'heal', ...base });
      // A restarted member gets a moment to rejoin before its group is hit again.
      await sleep(kind === 'kill' ? 1_000 : 300);
    } finally {
      this.faulty.delete(group.id);
    }
  }

  private async moveLoop(ns: string, untilMs: number): Promise<void> {
    const urls = this.o.fleet.controlPlaneUrls;
    while (Date.now() < untilMs) {
      const tenant = await cpGet<{ cell: string }>(urls, `/v1/tenants/${ns}`, Date.now() + MOVE_END_MS_MAX);
      if (!tenant) {
        this.problems.push(`${ns}: GET /v1/tenants/${ns} answered no instance within ${MOVE_END_MS_MAX} ms`);
        return;
      }
      const to = this.o.fleet.cells.map((c) => c.id).find((c) => c !== tenant.cell)!;
      const started = Date.now();
      const move = await this.startMove(ns, to, untilMs);
      if (!move) {
        await sleep(POLL_MS);
        continue;
      }
      this.current.set(ns, { from: move.fromCell, to: move.toCell });
      const end = await this.waitForMove(move.id);
      this.current.delete(ns);
      if (!end) {
        this.problems.push(
          `move ${move.id} of ${ns} (${move.fromCell} -> ${move.toCell}) did not end within ${MOVE_END_MS_MAX} ms of the faults' end`,
        );
        return;
      }
      this.moves.push({ ...this.outcomeOf(end), tookMs: Date.now() - started });
      this.o.log(
        `chaos moves: ${ns} ${end.fromCell} -> ${end.toCell} ${end.state}${end.error ? ` (${end.error})` : ''} in ${Date.now() - started} ms`,
      );
      await sleep(this.o.random.range(300, 1_500));
    }
  }

  private outcomeOf(m: MoveBody): Omit<MoveOutcome, 'tookMs'> {
    const { id, namespace, fromCell, toCell, state, error, unavailableMs, sessions, locks } = m;
    return {
      id,
      namespace,
      fromCell,
      toCell,
      state,
      ...(error !== undefined ? { error } : {}),
      ...(unavailableMs !== undefined ? { unavailableMs } : {}),
      ...(sessions !== undefined ? { sessions } : {}),
      ...(locks !== undefined ? { locks } : {}),
    };
  }

  /**
   * POST /v1/moves to any instance. A refusal MOVE_IN_PROGRESS means an
   * earlier POST whose answer was lost started one: that move is the one
   * to follow. Undefined when none started before `untilMs`.
   */
  private async startMove(ns: string, to: string, untilMs: number): Promise<MoveBody | undefined> {
    const urls = this.o.fleet.controlPlaneUrls;
    for (let round = 0; Date.now() < untilMs; round++) {
      const res = await cpHttp(urls[round % urls.length]!, 'POST', '/v1/moves', { namespace: ns, toCell: to });
      if (res.status === 202) return res.body as MoveBody;
      const code = (res.body as { code?: string } | undefined)?.code;
      if (res.status === 409 && code === 'MOVE_IN_PROGRESS') {
        const list = await cpGet<{ moves: MoveBody[] }>(urls, '/v1/moves', untilMs);
        const open = list?.moves.find((m) => m.namespace === ns && m.state !== 'done' && m.state !== 'failed');
        if (open) return open;
      } else if (res.status === 409 && code === 'ALREADY_THERE') {
        return undefined;
      } else if (res.status !== 0 && res.status !== 503) {
        this.problems.push(`POST /v1/moves ${ns} -> ${to}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
        return undefined;
      }
      await sleep(POLL_MS);
    }
    return undefined;
  }

  /** Polls the move until done or failed; gives up MOVE_END_MS_MAX after the later of now and the nemesis's end. */
  private async waitForMove(id: string): Promise<MoveBody | undefined> {
    const until = Math.max(Date.now(), this.stopAtMs) + MOVE_END_MS_MAX;
    const urls = this.o.fleet.controlPlaneUrls;
    for (let round = 0; Date.now() < until; round++) {
      const res = await cpHttp(urls[round % urls.length]!, 'GET', `/v1/moves/${id}`);
      const m = res.body as MoveBody | undefined;
      if (res.status === 200 && (m!.state === 'done' || m!.state === 'failed')) return m;
      await sleep(POLL_MS);
    }
    return undefined;
  }
}

/**
 * Reads the control plane's Server-Sent Events stream with fetch(), not
 * EventSource: EventSource cannot send an Authorization header, and a token
 * in the URL would end up in logs. The wire format is the standard one
 * (`event:` and `data:` lines, a blank line ends an event, `:` lines are
 * comments).
 */

export interface StreamHandlers {
  onEvent(name: string, data: unknown): void;
  /** The server refused the token (401/403): the page asks for another. */
  onRefused(status: number, detail: string): void;
  /** The stream broke or could not open; it is retried after `retryMs`. */
  onBroken(detail: string, retryMs: number): void;
}

/** Waits between reconnects: short, because the page is a live view; capped so a dead server is not hammered. */
const RETRY_MS_MIN = 500;
const RETRY_MS_MAX = 5_000;

/** Splits a chunk of the stream into complete events; returns what is left over for the next chunk. */
function drain(buffer: string, emit: (name: string, data: string) => void): string {
  let at = buffer.indexOf('\n\n');
  while (at >= 0) {
    const block = buffer.slice(0, at);
    buffer = buffer.slice(at + 2);
    let name = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) name = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
    }
    if (data.length > 0) emit(name, data.join('\n'));
    at = buffer.indexOf('\n\n');
  }
  return buffer;
}

async function readOnce(url: string, token: string | null, h: StreamHandlers, signal: AbortSignal): Promise<'refused' | 'ended'> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal, cache: 'no-store' });
  if (res.status === 401 || res.status === 403) {
    const body = (await res.json().catch(() => ({}))) as { detail?: string };
    h.onRefused(res.status, body.detail ?? res.statusText);
    return 'refused';
  }
  if (!res.ok || res.body === null) throw new Error(`the event stream answered ${res.status}`);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return 'ended';
    buffer = drain(buffer + value.replace(/\r\n/g, '\n'), (name, data) => h.onEvent(name, JSON.parse(data)));
  }
}

/** Follows the stream at `url` until `signal` aborts, reconnecting after breaks; stops after a refusal. */
export async function follow(url: string, token: string | null, h: StreamHandlers, signal: AbortSignal): Promise<void> {
  let retryMs = RETRY_MS_MIN;
  while (!signal.aborted) {
    try {
      if ((await readOnce(url, token, h, signal)) === 'refused') return;
      retryMs = RETRY_MS_MIN;
      h.onBroken('the event stream ended; reconnecting', retryMs);
    } catch (e) {
      if (signal.aborted) return;
      h.onBroken(`${(e as Error).message}; reconnecting`, retryMs);
    }
    await new Promise((resolve) => setTimeout(resolve, retryMs));
    retryMs = Math.min(retryMs * 2, RETRY_MS_MAX);
  }
}

/** Small formatting helpers shared by the views. */

export function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  const h = Math.floor(s / 3600);
  return h < 48 ? `${h} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(h / 24)} d`;
}

export function bytes(n: number | undefined): string {
  if (n === undefined) return '–';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function num(n: number | undefined): string {
  return n === undefined ? '–' : String(n);
}

/** "used / quota", or "used" when there is no quota. */
export function against(used: number | undefined, quota: number | undefined): string {
  if (used === undefined) return quota === undefined ? '–' : `– / ${quota}`;
  return quota === undefined ? String(used) : `${used} / ${quota}`;
}

export function over(used: number | undefined, quota: number | undefined): boolean {
  return used !== undefined && quota !== undefined && used >= quota;
}

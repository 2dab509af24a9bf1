// The charts docs/benchmarks.md shows, written as SVG by the suites
// themselves: a line chart (a figure against client counts, one line per
// system) and a grouped bar chart (a figure per scenario, one bar per
// system). Pure functions of their data: same figures, same bytes. Text is
// escaped; a missing value leaves a gap (lines) or no bar, never a zero.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Every system keeps its colour in every chart (colour-blind-safe: Okabe–Ito). */
export const SYSTEM_COLOURS = { Fencer: '#0072B2', ZooKeeper: '#E69F00', etcd: '#009E73' };
const FALLBACK_COLOURS = ['#CC79A7', '#56B4E9', '#D55E00', '#000000'];
const WIDTH = 560;
const HEIGHT = 320;
const MARGIN = { top: 40, right: 150, bottom: 50, left: 70 };
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

/** `s` safe inside SVG text and attributes. */
export function escapeXml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

/** Axis ticks from 0 to at least `max`: about `count` steps of 1, 2, 2.5 or 5 × a power of ten. */
export function niceTicks(max, count = 5) {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const raw = max / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((s) => s >= raw);
  const ticks = [];
  for (let t = 0; t < max + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  if (ticks[ticks.length - 1] < max) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

/** A tick's label: thousands separated, at most 3 decimals. */
export function tickLabel(v) {
  return v.toLocaleString('en-US', { maximumFractionDigits: 3 });
}

function colourOf(name, i) {
  const known = Object.keys(SYSTEM_COLOURS).find((k) => name.startsWith(k));
  return known ? SYSTEM_COLOURS[known] : FALLBACK_COLOURS[i % FALLBACK_COLOURS.length];
}

/** The frame every chart shares: title, y grid and labels, x labels, legend. Returns { parts, x0, y, bandOf }. */
function frame({ title, yLabel, xLabel, categories, series, yMax }) {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const ticks = niceTicks(yMax);
  const top = ticks[ticks.length - 1];
  const y = (v) => MARGIN.top + plotH - (v / top) * plotH;
  const band = plotW / categories.length;
  const bandOf = (i) => MARGIN.left + band * i;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${escapeXml(title)}" ${FONT} font-size="12">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${MARGIN.left}" y="22" font-size="14" font-weight="600">${escapeXml(title)}</text>`,
  ];
  for (const t of ticks) {
    const ty = y(t).toFixed(1);
    parts.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${ty}" y2="${ty}" stroke="#e0e0e0"/>`);
    parts.push(`<text x="${MARGIN.left - 6}" y="${ty}" text-anchor="end" dominant-baseline="middle">${tickLabel(t)}</text>`);
  }
  parts.push(
    `<text transform="translate(16 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(yLabel)}</text>`,
    `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${y(0)}" y2="${y(0)}" stroke="#444"/>`,
  );
  categories.forEach((c, i) =>
    parts.push(`<text x="${(bandOf(i) + band / 2).toFixed(1)}" y="${MARGIN.top + plotH + 18}" text-anchor="middle">${escapeXml(c)}</text>`),
  );
  if (xLabel) parts.push(`<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 10}" text-anchor="middle">${escapeXml(xLabel)}</text>`);
  series.forEach((s, i) => {
    const ly = MARGIN.top + 8 + i * 20;
    const lx = MARGIN.left + plotW + 16;
    parts.push(`<rect x="${lx}" y="${ly - 6}" width="12" height="12" fill="${colourOf(s.name, i)}"/>`);
    parts.push(`<text x="${lx + 18}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`);
  });
  return { parts, y, band, bandOf };
}

const finite = (v) => typeof v === 'number' && Number.isFinite(v);
const maxOf = (series) => Math.max(0, ...series.flatMap((s) => s.values.filter(finite)));

/**
 * A line chart: `categories` along x (evenly spaced), one line per series
 * ({ name, values: number[] | undefined[] }, a value per category), y from 0.
 */
export function lineChart({ title, yLabel, xLabel, categories, series }) {
  const { parts, y, band, bandOf } = frame({ title, yLabel, xLabel, categories, series, yMax: maxOf(series) });
  series.forEach((s, i) => {
    const colour = colourOf(s.name, i);
    const pts = s.values.map((v, k) => (finite(v) ? [bandOf(k) + band / 2, y(v)] : undefined));
    // A gap (a value not measured) splits the line into runs.
    let run = [];
    const flush = () => {
      if (run.length > 1) parts.push(`<polyline fill="none" stroke="${colour}" stroke-width="2" points="${run.join(' ')}"/>`);
      run = [];
    };
    for (const pt of pts) {
      if (!pt) flush();
      else run.push(`${pt[0].toFixed(1)},${pt[1].toFixed(1)}`);
    }
    flush();
    pts.forEach((pt, k) => {
      if (pt)
        parts.push(
          `<circle cx="${pt[0].toFixed(1)}" cy="${pt[1].toFixed(1)}" r="3.5" fill="${colour}"><title>${escapeXml(`${s.name}, ${categories[k]}: ${tickLabel(s.values[k])}`)}</title></circle>`,
        );
    });
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** A grouped bar chart: a group per category, a bar per series (same data shape as lineChart). */
export function barChart({ title, yLabel, xLabel, categories, series }) {
  const { parts, y, band, bandOf } = frame({ title, yLabel, xLabel, categories, series, yMax: maxOf(series) });
  const inner = band * 0.8;
  const barW = inner / Math.max(1, series.length);
  series.forEach((s, i) => {
    s.values.forEach((v, k) => {
      if (!finite(v)) return;
      const x = bandOf(k) + band * 0.1 + barW * i;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y(v).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(y(0) - y(v)).toFixed(1)}" fill="${colourOf(s.name, i)}"><title>${escapeXml(`${s.name}, ${categories[k]}: ${tickLabel(v)}`)}</title></rect>`,
      );
    });
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** Writes charts ({ file, svg }) under `dir`; returns their paths. */
export function writeCharts(dir, charts) {
  mkdirSync(dir, { recursive: true });
  return charts.map(({ file, svg }) => {
    const at = path.join(dir, file);
    writeFileSync(at, svg);
    return at;
  });
}

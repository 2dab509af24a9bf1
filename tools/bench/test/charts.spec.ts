// Goal: the charts the suites draw are well-formed SVG that place every
// measured value where its scale says, leave unmeasured values out instead
// of drawing zeros, escape text, and are the same bytes for the same data.
// Method: the pure chart functions on small series; positions read back
// from the SVG's attributes.
import { describe, expect, it } from 'vitest';
import { barChart, escapeXml, lineChart, niceTicks, tickLabel } from '../src/charts.mjs';

/** Every element opened is closed, in order (self-closing ones too): a well-formedness check of the shapes these charts use. */
function balanced(svg: string): boolean {
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-z]+)\b[^>]*?(\/?)>/g)) {
    const [, closing, name, selfClosing] = m;
    if (selfClosing) continue;
    if (!closing) stack.push(name);
    else if (stack.pop() !== name) return false;
  }
  return stack.length === 0;
}

const numbers = (svg: string, re: RegExp) => [...svg.matchAll(re)].map((m) => Number(m[1]));

const SPEC = {
  title: 'Cycles <by> clients & "load"',
  yLabel: 'cycles/s',
  xLabel: 'clients',
  categories: ['1', '16', '64'],
  series: [
    { name: 'Fencer', values: [100, 400, 800] },
    { name: 'ZooKeeper-3', values: [150, undefined, 1000] },
    { name: 'etcd-5', values: [90, 350, 700] },
  ],
};

describe('axis ticks', () => {
  it('start at 0, reach the maximum, and step by 1, 2, 2.5 or 5 times a power of ten', () => {
    expect(niceTicks(1000)).toEqual([0, 200, 400, 600, 800, 1000]);
    expect(niceTicks(7.3)).toEqual([0, 2, 4, 6, 8]);
    expect(niceTicks(0.012)).toEqual([0, 0.0025, 0.005, 0.0075, 0.01, 0.0125]);
    for (const max of [0.37, 3, 48, 999, 123_456]) {
      const t = niceTicks(max);
      expect(t[0]).toBe(0);
      expect(t[t.length - 1]).toBeGreaterThanOrEqual(max);
      expect(t.length).toBeLessThanOrEqual(8);
    }
  });

  it('give an axis to a chart with nothing measured', () => {
    expect(niceTicks(0)).toEqual([0, 1]);
    expect(niceTicks(Number.NaN)).toEqual([0, 1]);
  });

  it('label thousands and short decimals', () => {
    expect(tickLabel(12500)).toBe('12,500');
    expect(tickLabel(0.0025)).toBe('0.003');
  });
});

describe('a line chart', () => {
  const svg = lineChart(SPEC);

  it('is well-formed, titled and escaped', () => {
    expect(balanced(svg)).toBe(true);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg).toContain(`<title>${escapeXml(SPEC.title)}</title>`);
    expect(svg).not.toContain('<by>');
    expect(escapeXml(`a<b & "c" 'd'`)).toBe('a&lt;b &amp; &quot;c&quot; &#39;d&#39;');
  });

  it('draws a point per measured value, higher values higher up, and none for a gap', () => {
    const cy = numbers(svg, /<circle cx="[\d.]+" cy="([\d.]+)"/g);
    expect(cy).toHaveLength(8);
    // Fencer's points in order: 100, 400, 800 cycles/s; larger values sit higher (smaller y).
    expect(cy[0]).toBeGreaterThan(cy[1]);
    expect(cy[1]).toBeGreaterThan(cy[2]);
    // The top tick (1,000) is the top of the plot: ZooKeeper's 1,000 sits on it, at y = 40.
    expect(svg).toMatch(/cy="40\.0" r="3\.5" fill="#E69F00"><title>ZooKeeper-3, 64: 1,000<\/title>/);
    expect(svg).not.toMatch(/ZooKeeper-3, 16/);
  });

  it('splits a line at a gap instead of bridging it', () => {
    const lines = [...svg.matchAll(/<polyline[^>]*stroke="([^"]+)"[^>]*points="([^"]+)"/g)].map((m) => [m[1], m[2].split(' ').length]);
    // ZooKeeper has two points either side of a gap: no line; Fencer and etcd one line of three points each.
    expect(lines).toEqual([
      ['#0072B2', 3],
      ['#009E73', 3],
    ]);
  });

  it('keeps each system in its colour and names it in the legend', () => {
    for (const [name, colour] of [
      ['Fencer', '#0072B2'],
      ['ZooKeeper-3', '#E69F00'],
      ['etcd-5', '#009E73'],
    ]) {
      expect(svg).toContain(`fill="${colour}"/>\n<text`);
      expect(svg).toContain(`>${name}</text>`);
    }
  });

  it('is the same bytes for the same data', () => {
    expect(lineChart(SPEC)).toBe(svg);
  });
});

describe('a bar chart', () => {
  it('draws one bar per measured value, its height proportional to it', () => {
    const svg = barChart({
      ...SPEC,
      series: [
        { name: 'Fencer', values: [2, 1, undefined] },
        { name: 'etcd-5', values: [4, 0.5, 1] },
      ],
    });
    expect(balanced(svg)).toBe(true);
    const heights = numbers(svg, /<rect x="[\d.]+" y="[\d.]+" width="[\d.]+" height="([\d.]+)" fill="#[0-9A-F]+"><title>/g);
    expect(heights).toHaveLength(5);
    // Bars in series order: Fencer 2, 1; etcd 4, 0.5, 1.
    expect(heights[0] / heights[2]).toBeCloseTo(0.5, 2);
    expect(heights[1] / heights[0]).toBeCloseTo(0.5, 2);
    expect(heights[3] / heights[2]).toBeCloseTo(0.125, 2);
  });
});

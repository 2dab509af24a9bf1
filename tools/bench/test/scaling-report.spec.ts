// Goal: the scaling suite says where the cores run out from its own rows:
// the first size at which the machine was (nearly) all busy, and the first
// step of cells that no longer added throughput; a failed size is skipped,
// not read as zero.
// Method: whereCoresRunOut on hand-made rows.
import { describe, expect, it } from 'vitest';
import { GAIN_MIN, SATURATED_SHARE, whereCoresRunOut, type ScalingRow } from '../src/suites/scaling-report.mjs';

const row = (cells: number, rate: number, machineCores: number): ScalingRow => ({
  cells,
  rate,
  ops: rate * 10,
  cpu: { wallS: 10, serverS: 10, loadgenS: 5, machineS: machineCores * 10 },
});

describe('where the cores run out', () => {
  it('names the first saturated size and the first step that stopped scaling', () => {
    const rows = [row(1, 1000, 1.2), row(2, 1800, 2 * SATURATED_SHARE), row(4, 1800 * (1 + GAIN_MIN) - 1, 2)];
    expect(whereCoresRunOut(rows, 2)).toEqual({ saturatedAt: 2, flatAt: 4 });
  });

  it('names neither while every step gains and the machine has room', () => {
    expect(whereCoresRunOut([row(1, 500, 0.8), row(2, 900, 1.2), row(4, 1500, 1.7)], 2)).toEqual({
      saturatedAt: undefined,
      flatAt: undefined,
    });
  });

  it('skips a size that failed instead of counting it as no throughput', () => {
    const rows = [row(1, 500, 0.8), { cells: 2, error: 'no leader' }, row(4, 1500, 1.7)];
    expect(whereCoresRunOut(rows, 2)).toEqual({ saturatedAt: undefined, flatAt: undefined });
  });
});

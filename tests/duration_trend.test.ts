import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { DurationTrend } from "../lib/execute/run_stats.ts";

/** Mean and least-squares slope (ms per block) computed directly from the list. */
function direct(ms: readonly number[]): { mean: number; slope: number } {
  const n = ms.length;
  const meanX = (n - 1) / 2;
  const mean = ms.reduce((s, y) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  ms.forEach((y, x) => {
    sxy += (x - meanX) * (y - mean);
    sxx += (x - meanX) * (x - meanX);
  });
  return { mean, slope: sxx === 0 ? 0 : sxy / sxx };
}

describe("DurationTrend (the run report's mean and slope of block times)", () => {
  test("no block and one block: mean and slope are 0, then the one time and 0", () => {
    const trend = new DurationTrend();
    assert.equal(trend.count, 0);
    assert.equal(trend.meanMs, 0);
    assert.equal(trend.slopeMs, 0);
    trend.add(0.25);
    assert.equal(trend.count, 1);
    assert.equal(trend.meanMs, 250);
    assert.equal(trend.slopeMs, 0);
    assert.equal(trend.totalSeconds, 0.25);
  });

  test("a steady rise is found exactly", () => {
    const trend = new DurationTrend();
    for (let x = 0; x < 10; x++) trend.add((5 + 2 * x) / 1000);
    assert.ok(Math.abs(trend.meanMs - 14) < 1e-9, `mean ${trend.meanMs}`);
    assert.ok(Math.abs(trend.slopeMs - 2) < 1e-9, `slope ${trend.slopeMs}`);
  });

  test("past 46,341 blocks (x * x beyond 2^31) it still agrees with a direct fit", () => {
    // Times that rise by a microsecond per block, with a deterministic wobble.
    const ms: number[] = [];
    for (let x = 0; x < 120_000; x++) ms.push(3 + 0.001 * x + ((x * 7919) % 13) / 100);
    const trend = new DurationTrend();
    for (const y of ms) trend.add(y / 1000);
    const want = direct(ms);
    assert.equal(trend.count, 120_000);
    assert.ok(Math.abs(trend.meanMs - want.mean) < 1e-6 * want.mean, `mean ${trend.meanMs}`);
    assert.ok(
      Math.abs(trend.slopeMs - want.slope) < 1e-6 * want.slope,
      `slope ${trend.slopeMs}, direct ${want.slope}`,
    );
    assert.ok(Math.abs(trend.totalSeconds - want.mean * 120_000 / 1000) < 1e-6);
  });
});

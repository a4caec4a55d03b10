import { describe, expect, it } from "vitest";
import { columns, summary, type Point } from "./metrics";

const point = (t: number, rps: number, p99: number | null, e5: number): Point => ({
  t,
  rps,
  p50_ms: p99 === null ? null : p99 / 2,
  p99_ms: p99,
  errors: e5,
  responses: { "2xx": rps * 5 - e5, "4xx": 0, "5xx": e5 },
});

describe("metrics", () => {
  it("orders points and turns counts per interval into rates", () => {
    const c = columns([point(10_000, 2, 8, 5), point(5_000, 1, null, 0)], 5000);
    expect(c.times).toEqual([5_000, 10_000]);
    expect(c.rps).toEqual([1, 2]);
    expect(c.p99).toEqual([null, 8]);
    expect(c.errorsPerSecond).toEqual([0, 1]);
  });

  it("sums the window", () => {
    expect(summary([point(0, 2, 8, 5), point(5000, 2, 12, 0)], 5000)).toEqual({
      requests: 20,
      errorRate: 0.25,
      worstP99: 12,
    });
    expect(summary([], 5000)).toEqual({ requests: 0, errorRate: 0, worstP99: null });
  });
});

import { describe, expect, it } from "vitest";
import { formatAgo, formatDay, formatBytes, formatMs, formatNumber, formatTime, formatWeights, shortDigest } from "./format";

describe("format", () => {
  it("sizes in binary units", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(1023)).toBe("1023 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(64 << 20)).toBe("64 MiB");
    expect(formatBytes(-1)).toBe("–");
  });

  it("digests shortened to twelve hex digits", () => {
    expect(shortDigest(`sha256:${"ab".repeat(32)}`)).toBe("sha256:abababababab");
    expect(shortDigest("nodigest")).toBe("nodigest");
  });

  it("times in UTC, and ago", () => {
    expect(formatTime(Date.UTC(2026, 10, 27, 9, 14, 3))).toBe("2026-11-27 09:14:03");
    expect(formatTime(null)).toBe("–");
    expect(formatDay(Date.UTC(2026, 10, 27, 23, 59))).toBe("2026-11-27");
    expect(formatDay(undefined)).toBe("–");
    const now = Date.UTC(2026, 0, 1);
    expect(formatAgo(now - 5_000, now)).toBe("5 s ago");
    expect(formatAgo(now - 180_000, now)).toBe("3 min ago");
    expect(formatAgo(now - 7_200_000, now)).toBe("2 h ago");
    expect(formatAgo(now - 3 * 86_400_000, now)).toBe("3 d ago");
  });

  it("numbers and latencies", () => {
    expect(formatNumber(12.345)).toBe("12.3");
    expect(formatNumber(123456)).toBe("123,456");
    expect(formatNumber(Number.NaN)).toBe("–");
    expect(formatMs(0.4213)).toBe("0.42 ms");
    expect(formatMs(1530)).toBe("1.5 s");
    expect(formatMs(null)).toBe("–");
  });

  it("deployment weights", () => {
    expect(formatWeights([{ version: 3, percent: 100 }])).toBe("v3");
    expect(
      formatWeights([
        { version: 4, percent: 10 },
        { version: 3, percent: 90 },
      ]),
    ).toBe("v4 10% · v3 90%");
  });
});

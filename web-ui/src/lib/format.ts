// How numbers, sizes, times and digests read in the UI.

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 1536 → "1.5 KiB". */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "–";
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${UNITS[i]}`;
}

/** `sha256:abcdef…` → `sha256:abcdef012345` (12 hex digits: enough to tell apart). */
export function shortDigest(digest: string): string {
  const [algo, hex] = digest.split(":");
  return hex ? `${algo}:${hex.slice(0, 12)}` : digest.slice(0, 19);
}

/** Milliseconds since the epoch → "2026-11-27 09:14:03" in UTC (what the node's log says). */
export function formatTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  return new Date(ms).toISOString().slice(0, 19).replace("T", " ");
}

/** "3 min ago" for a time in the past, relative to `now`. */
export function formatAgo(ms: number, now = Date.now()): string {
  const s = Math.round((now - ms) / 1000);
  if (s < 0) return "in the future";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** A rate or count with at most three significant figures: 12.3, 1,234. */
export function formatNumber(n: number | null | undefined, digits = 3): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  if (Math.abs(n) >= 10 ** digits) return Math.round(n).toLocaleString("en-US");
  return Number(n.toPrecision(digits)).toLocaleString("en-US");
}

/** Milliseconds as latency: 0.42 ms, 12 ms, 1.2 s. */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  if (ms >= 1000) return `${formatNumber(ms / 1000, 2)} s`;
  return `${formatNumber(ms, 2)} ms`;
}

/** A deployment's weights: "v3" or "v4 10% · v3 90%". */
export function formatWeights(versions: { version: number; percent: number }[]): string {
  if (versions.length === 1 && versions[0]) return `v${versions[0].version}`;
  return versions.map((w) => `v${w.version} ${w.percent}%`).join(" · ");
}

/** Milliseconds since the epoch → its UTC day, "2026-11-27". */
export function formatDay(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  return new Date(ms).toISOString().slice(0, 10);
}

// What the app page sends to deploy: pure functions, tested alone.
import type { Deployment, VersionSpec, Weighted } from "./api/control";

/** A component name from a file name, as `edge deploy` makes it. */
export function componentName(fileName: string): string {
  const stem = fileName.replace(/\.(wasm|tar\.gz|tgz|tar)$/i, "");
  const name = stem.toLowerCase().replace(/[^a-z0-9-]/g, "-").replace(/^[^a-z]+/, "").slice(0, 63);
  return name || "app";
}

/** What kind of upload a file is, by its name. */
export function uploadKind(fileName: string): "component" | "spin-app" | null {
  if (/\.wasm$/i.test(fileName)) return "component";
  if (/\.(tar\.gz|tgz)$/i.test(fileName)) return "spin-app";
  return null;
}

/** A version of one uploaded component serving `route`. */
export function singleComponentSpec(component: string, digest: string, route: string): VersionSpec {
  return { components: { [component]: { digest } }, routes: [{ route, component }] };
}

/** The version that gets most of an app's traffic now. */
export function mainVersion(d: Deployment | null): number | null {
  if (!d || d.versions.length === 0) return null;
  return [...d.versions].sort((a, b) => b.percent - a.percent || b.version - a.version)[0]!.version;
}

/**
 * The weights that give `version` `percent` of the traffic and leave the
 * rest where the app serves now. 100, or an app that serves nothing yet,
 * moves everything.
 */
export function rolloutWeights(version: number, percent: number, current: Deployment | null): Weighted[] {
  const p = Math.round(percent);
  if (p < 1 || p > 100) throw new RangeError("percent must be 1 to 100");
  const others = (current?.versions ?? []).filter((w) => w.version !== version);
  if (p === 100 || others.length === 0) return [{ version, percent: 100 }];
  const rest = [...others].sort((a, b) => b.percent - a.percent)[0]!;
  return [
    { version, percent: p },
    { version: rest.version, percent: 100 - p },
  ];
}

/** The percent of traffic `version` gets in `d` (0 if none). */
export function servingPercent(d: Deployment | null, version: number): number {
  return d?.versions.find((w) => w.version === version)?.percent ?? 0;
}

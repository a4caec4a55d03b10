// The quota form: every field of a tenant's quota with its meaning and
// check, and the conversion between the form's strings and the API's
// numbers (an empty share is the node's default).
import type { Quota, Shares } from "./api/control";

export interface QuotaField {
  key: keyof Omit<Quota, "shares"> | `shares.${keyof Shares}`;
  label: string;
  unit: "count" | "bytes" | "ms" | "per s";
  /** Shares may be left empty (the node's [limits] default). */
  optional: boolean;
  /** Least value the API takes (default 1), as `[limits]` does. */
  min?: number;
  /** Most value the API takes whatever the node (the pool's own bounds
   * are the server's to check). */
  max?: number;
}

export const QUOTA_FIELDS: QuotaField[] = [
  { key: "max_apps", label: "Apps", unit: "count", optional: false },
  { key: "max_components", label: "Components per version", unit: "count", optional: false },
  { key: "max_versions", label: "Versions kept per app", unit: "count", optional: false },
  { key: "max_artifact_bytes", label: "Bytes per component", unit: "bytes", optional: false },
  { key: "max_total_artifact_bytes", label: "Bytes of all components", unit: "bytes", optional: false },
  { key: "shares.max_instances", label: "Instances at once", unit: "count", optional: true },
  { key: "shares.max_sessions", label: "Pinned sessions", unit: "count", optional: true },
  { key: "shares.max_inflight", label: "Requests in flight", unit: "count", optional: true },
  { key: "shares.session_rate", label: "New sessions", unit: "per s", optional: true },
  { key: "shares.memory_bytes", label: "Memory per instance", unit: "bytes", optional: true, min: 65536 },
  { key: "shares.max_total_memory_bytes", label: "Memory of all instances", unit: "bytes", optional: true, min: 65536 },
  { key: "shares.request_deadline_ms", label: "Request deadline", unit: "ms", optional: true, max: 600000 },
  { key: "shares.max_outbound_requests", label: "Outbound requests in flight", unit: "count", optional: true },
  { key: "shares.kv_store_bytes", label: "Key-value store size", unit: "bytes", optional: true, min: 4096 },
  { key: "shares.sqlite_database_bytes", label: "SQLite database size", unit: "bytes", optional: true, min: 65536 },
  { key: "shares.sqlite_statements", label: "SQLite statements at once", unit: "count", optional: true, max: 65536 },
  { key: "shares.max_open_files", label: "Open files", unit: "count", optional: true, max: 1048576 },
];

export type QuotaForm = Record<QuotaField["key"], string>;

export function quotaToForm(q: Quota): QuotaForm {
  const form = {} as QuotaForm;
  for (const f of QUOTA_FIELDS) {
    const v = f.key.startsWith("shares.")
      ? q.shares?.[f.key.slice(7) as keyof Shares]
      : q[f.key as keyof Omit<Quota, "shares">];
    form[f.key] = v === undefined || v === null ? "" : String(v);
  }
  return form;
}

/** Why a field's value is refused, or null. */
export function quotaFieldProblem(f: QuotaField, value: string): string | null {
  const v = value.trim();
  if (!v) return f.optional ? null : "a value is needed";
  if (!/^\d+$/.test(v)) return "a whole number";
  const n = Number(v);
  if (!Number.isSafeInteger(n)) return "too large";
  const min = f.min ?? 1;
  if (n < min) return `at least ${min}`;
  if (f.max !== undefined && n > f.max) return `at most ${f.max}`;
  return null;
}

/** The quota a valid form describes. */
export function formToQuota(form: QuotaForm): Quota {
  const shares: Shares = {};
  const quota = { shares } as Quota;
  for (const f of QUOTA_FIELDS) {
    const v = form[f.key].trim();
    if (f.key.startsWith("shares.")) {
      if (v) shares[f.key.slice(7) as keyof Shares] = Number(v);
    } else {
      quota[f.key as keyof Omit<Quota, "shares">] = Number(v);
    }
  }
  return quota;
}

// The per-app history the node keeps (GET /v1/tenants/{t}/metrics) as
// plot columns.
export interface Point {
  t: number;
  rps: number;
  p50_ms: number | null;
  p99_ms: number | null;
  errors: number;
  responses: { "2xx": number; "4xx": number; "5xx": number };
}

export interface AppSeries {
  app: string;
  points: Point[];
}

export interface Metrics {
  interval_ms: number;
  apps: AppSeries[];
}

/** The columns the plots draw: times, then one array per measure. */
export function columns(points: Point[], intervalMs: number) {
  const sorted = [...points].sort((a, b) => a.t - b.t);
  const seconds = intervalMs / 1000;
  return {
    times: sorted.map((p) => p.t),
    rps: sorted.map((p) => p.rps),
    p50: sorted.map((p) => p.p50_ms),
    p99: sorted.map((p) => p.p99_ms),
    errorsPerSecond: sorted.map((p) => p.responses["5xx"] / seconds),
    clientErrorsPerSecond: sorted.map((p) => p.responses["4xx"] / seconds),
  };
}

/** Totals over the window: requests, 5xx share, worst p99. */
export function summary(points: Point[], intervalMs: number) {
  const seconds = intervalMs / 1000;
  const requests = points.reduce((n, p) => n + p.rps * seconds, 0);
  const errors = points.reduce((n, p) => n + p.responses["5xx"], 0);
  const p99s = points.map((p) => p.p99_ms).filter((v): v is number => v !== null);
  return {
    requests: Math.round(requests),
    errorRate: requests > 0 ? errors / requests : 0,
    worstP99: p99s.length ? Math.max(...p99s) : null,
  };
}

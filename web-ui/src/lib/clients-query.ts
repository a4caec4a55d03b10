// The clients table's query as the URL keeps it: read with defaults and
// bounds, written back without the defaults.
import type { SortingState } from "@tanstack/svelte-table";
import type { ClientQuery } from "./api/billing";
import { formatSorting, parseSorting } from "./urlstate";

/** Columns the billing app sorts by (it refuses others). */
export const SORTABLE = ["name", "contact_name", "phone", "email", "tariff", "registered_at", "id"] as const;
export const PER_PAGE = [25, 50, 100, 200] as const;
export const DEFAULT_SORT: SortingState = [{ id: "registered_at", desc: true }];

export function queryFromUrl(url: URL): ClientQuery {
  const p = url.searchParams;
  const page = Number(p.get("page"));
  const perPage = Number(p.get("per_page"));
  const sorting = parseSorting(p.get("sort"), SORTABLE) ?? DEFAULT_SORT;
  return {
    page: Number.isInteger(page) && page >= 1 ? page : 1,
    per_page: (PER_PAGE as readonly number[]).includes(perPage) ? perPage : 50,
    sort: formatSorting(sorting),
    q: p.get("q") ?? "",
    tariff: p.get("tariff") ?? "",
    registered_from: p.get("registered_from") ?? "",
    registered_to: p.get("registered_to") ?? "",
    dealer: p.get("dealer") ?? "",
  };
}

/** The URL parameters of `q`, defaults left out (null removes a parameter). */
export function queryToParams(q: ClientQuery): Record<string, string | null> {
  return {
    page: q.page > 1 ? String(q.page) : null,
    per_page: q.per_page !== 50 ? String(q.per_page) : null,
    sort: q.sort !== formatSorting(DEFAULT_SORT) ? q.sort : null,
    q: q.q || null,
    tariff: q.tariff || null,
    registered_from: q.registered_from || null,
    registered_to: q.registered_to || null,
    dealer: q.dealer || null,
  };
}

export function pages(total: number, perPage: number): number {
  return Math.max(1, Math.ceil(total / perPage));
}

/** The first and last day of the month of `now`, and of the 30 days before it (UTC, YYYY-MM-DD). */
export function ranges(now: Date) {
  const day = (d: Date) => d.toISOString().slice(0, 10);
  const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return {
    thisMonth: { from: day(first), to: day(now) },
    last30: { from: day(new Date(now.getTime() - 29 * 86_400_000)), to: day(now) },
  };
}

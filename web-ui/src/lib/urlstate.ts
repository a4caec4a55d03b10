// A table's sort, filter and page live in the URL, so a view can be
// shared and survives a reload.
import { goto } from "$app/navigation";
import { page } from "$app/state";
import type { SortingState } from "@tanstack/svelte-table";

/** `?sort=name,-created` → [{id: name}, {id: created, desc}]. */
export function parseSorting(value: string | null, allowed?: readonly string[]): SortingState | null {
  if (!value) return null;
  const out: SortingState = [];
  for (const part of value.split(",")) {
    const desc = part.startsWith("-");
    const id = desc ? part.slice(1) : part;
    if (!id || (allowed && !allowed.includes(id))) return null;
    out.push({ id, desc });
  }
  return out;
}

export function formatSorting(s: SortingState): string {
  return s.map((c) => (c.desc ? `-${c.id}` : c.id)).join(",");
}

export function sortingFromUrl(url: URL, fallback: SortingState, allowed?: readonly string[]): SortingState {
  return parseSorting(url.searchParams.get("sort"), allowed) ?? fallback;
}

/** Writes `params` into the current URL (null removes one) without a new history entry. */
export function setParams(params: Record<string, string | null>) {
  const url = new URL(page.url);
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === "") url.searchParams.delete(k);
    else url.searchParams.set(k, v);
  }
  if (url.search !== page.url.search) {
    goto(url, { replaceState: true, keepFocus: true, noScroll: true });
  }
}

/** Keeps `s` in the URL's `sort`, leaving it out while it is the page's default order. */
export function sortingToUrl(s: SortingState, byDefault: SortingState = []) {
  const value = formatSorting(s);
  setParams({ sort: value === formatSorting(byDefault) ? null : value || null });
}

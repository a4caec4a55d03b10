import { describe, expect, it, vi } from "vitest";

vi.mock("$app/navigation", () => ({ goto: vi.fn() }));
vi.mock("$app/state", () => ({ page: { url: new URL("http://x/") } }));

const { pages, queryFromUrl, queryToParams, ranges } = await import("./clients-query");

describe("clients query", () => {
  it("reads the URL with defaults", () => {
    expect(queryFromUrl(new URL("http://x/billing"))).toEqual({
      page: 1,
      per_page: 50,
      sort: "-registered_at",
      q: "",
      tariff: "",
      registered_from: "",
      registered_to: "",
      dealer: "",
    });
  });

  it("keeps only what is allowed", () => {
    const q = queryFromUrl(new URL("http://x/billing?page=-3&per_page=1000&sort=password&q=ac%25me"));
    expect(q.page).toBe(1);
    expect(q.per_page).toBe(50);
    expect(q.sort).toBe("-registered_at");
    expect(q.q).toBe("ac%me");
    expect(queryFromUrl(new URL("http://x/?sort=-name,phone&page=7&per_page=100"))).toMatchObject({
      sort: "-name,phone",
      page: 7,
      per_page: 100,
    });
  });

  it("writes back without the defaults", () => {
    const q = queryFromUrl(new URL("http://x/?page=2&q=acme"));
    expect(queryToParams(q)).toEqual({
      page: "2",
      per_page: null,
      sort: null,
      q: "acme",
      tariff: null,
      registered_from: null,
      registered_to: null,
      dealer: null,
    });
  });

  it("counts pages and date ranges", () => {
    expect(pages(0, 50)).toBe(1);
    expect(pages(101, 50)).toBe(3);
    expect(ranges(new Date(Date.UTC(2026, 10, 27, 12)))).toEqual({
      thisMonth: { from: "2026-11-01", to: "2026-11-27" },
      last30: { from: "2026-10-29", to: "2026-11-27" },
    });
  });
});

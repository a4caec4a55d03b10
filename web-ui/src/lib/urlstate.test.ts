import { describe, expect, it, vi } from "vitest";

vi.mock("$app/navigation", () => ({ goto: vi.fn() }));
vi.mock("$app/state", () => ({ page: { url: new URL("http://x/") } }));

const { formatSorting, parseSorting, sortingFromUrl } = await import("./urlstate");

describe("sorting in the URL", () => {
  it("round-trips", () => {
    const s = [
      { id: "name", desc: false },
      { id: "created", desc: true },
    ];
    expect(formatSorting(s)).toBe("name,-created");
    expect(parseSorting("name,-created")).toEqual(s);
  });

  it("refuses columns it does not know", () => {
    expect(parseSorting("name", ["name"])).toEqual([{ id: "name", desc: false }]);
    expect(parseSorting("password", ["name"])).toBeNull();
    expect(parseSorting("-", ["name"])).toBeNull();
    expect(sortingFromUrl(new URL("http://x/?sort=evil"), [{ id: "name", desc: false }], ["name"])).toEqual([
      { id: "name", desc: false },
    ]);
  });
});

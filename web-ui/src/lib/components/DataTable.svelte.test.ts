import { describe, expect, it, vi } from "vitest";
import { page, userEvent } from "vitest/browser";
import { render } from "vitest-browser-svelte";
import DataTable from "./DataTable.svelte";
import type { Column } from "./table";

interface Row {
  name: string;
  size: number;
}

const rows: Row[] = [
  { name: "beta", size: 20 },
  { name: "alpha", size: 300 },
  { name: "<b>gamma</b>", size: 1 },
];
const columns: Column<Row>[] = [
  { id: "name", header: "Name", value: (r) => r.name, sortable: true },
  { id: "size", header: "Size", value: (r) => r.size, sortable: true, numeric: true },
];

const names = () =>
  [...document.querySelectorAll("tbody tr")].map((tr) => tr.querySelector("td")?.textContent?.trim());

describe("DataTable", () => {
  it("sorts by a header and says so to screen readers", async () => {
    render(DataTable<Row>, { rows, columns, rowKey: (r) => r.name, caption: "things" });
    expect(names()).toEqual(["beta", "alpha", "<b>gamma</b>"]);
    await page.getByRole("button", { name: /Size/ }).click();
    expect(names()).toEqual(["<b>gamma</b>", "beta", "alpha"]);
    expect(page.getByRole("columnheader", { name: /Size/ }).element().getAttribute("aria-sort")).toBe("ascending");
    await page.getByRole("button", { name: /Size/ }).click();
    expect(names()).toEqual(["alpha", "beta", "<b>gamma</b>"]);
  });

  it("shows markup in values as text", async () => {
    render(DataTable<Row>, { rows, columns, rowKey: (r) => r.name, caption: "things" });
    expect(document.querySelector("tbody b")).toBeNull();
    await expect.element(page.getByText("<b>gamma</b>")).toBeVisible();
  });

  it("reports the order without sorting when the server sorts", async () => {
    render(DataTable<Row>, {
      rows,
      columns,
      rowKey: (r) => r.name,
      caption: "things",
      manualSorting: true,
    });
    await page.getByRole("button", { name: /Name/ }).click();
    expect(names()).toEqual(["beta", "alpha", "<b>gamma</b>"]);
  });

  it("moves between rows with the keyboard and activates with Enter", async () => {
    const onactivate = vi.fn();
    render(DataTable<Row>, { rows, columns, rowKey: (r) => r.name, caption: "things", onactivate });
    const trs = document.querySelectorAll<HTMLTableRowElement>("tbody tr");
    // One row is in the tab order.
    expect([...trs].filter((tr) => tr.tabIndex === 0)).toHaveLength(1);
    trs[0]!.focus();
    await userEvent.keyboard("{ArrowDown}");
    expect(document.activeElement).toBe(trs[1]);
    await userEvent.keyboard("{End}");
    expect(document.activeElement).toBe(trs[2]);
    await userEvent.keyboard("{Home}");
    expect(document.activeElement).toBe(trs[0]);
    await userEvent.keyboard("{ArrowUp}");
    expect(document.activeElement).toBe(trs[0]);
    await userEvent.keyboard("{Enter}");
    expect(onactivate).toHaveBeenCalledWith(rows[0]);
  });

  it("says when there is nothing", async () => {
    render(DataTable<Row>, { rows: [], columns, rowKey: (r) => r.name, caption: "things", empty: "No rows." });
    await expect.element(page.getByText("No rows.")).toBeVisible();
  });
});

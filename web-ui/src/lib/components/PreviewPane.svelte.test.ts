import { describe, expect, it } from "vitest";
import { page, userEvent } from "vitest/browser";
import { render } from "vitest-browser-svelte";
import PreviewPane from "./PreviewPane.svelte";

const props = {
  input: "<p>cat\nsame\ncat</p>",
  output: "<p>dog\nsame\ndog</p>",
  spans: [
    { rule: 0, input: [3, 6], output: [3, 6] },
    { rule: 0, input: [12, 15], output: [12, 15] },
  ] as { rule: number; input: [number, number]; output: [number, number] }[],
};

describe("PreviewPane", () => {
  it("highlights what the rules wrote, and shows markup as text", async () => {
    render(PreviewPane, props);
    const marks = document.querySelectorAll("[data-testid=preview-text] mark");
    expect([...marks].map((m) => m.textContent)).toEqual(["dog", "dog"]);
    expect(marks[0]?.getAttribute("title")).toBe("rule 1");
    expect(document.querySelector("[data-testid=preview-text] p")).toBeNull();
  });

  it("marks the matches in the input, and diffs lines", async () => {
    render(PreviewPane, props);
    await page.getByRole("tab", { name: "Input, matches marked" }).click();
    expect([...document.querySelectorAll("mark")].map((m) => m.textContent)).toEqual(["cat", "cat"]);
    await page.getByRole("tab", { name: "Diff" }).click();
    expect([...document.querySelectorAll(".removed")].map((e) => e.textContent)).toEqual(["- <p>cat", "- cat</p>"]);
    expect([...document.querySelectorAll(".added")].map((e) => e.textContent)).toEqual(["+ <p>dog", "+ dog</p>"]);
  });

  it("moves between views with the arrow keys", async () => {
    render(PreviewPane, props);
    (page.getByRole("tab", { name: "Output" }).element() as HTMLElement).focus();
    await userEvent.keyboard("{ArrowRight}");
    await expect.element(page.getByRole("tab", { name: "Input, matches marked" })).toHaveAttribute("aria-selected", "true");
    await userEvent.keyboard("{ArrowLeft}{ArrowLeft}");
    await expect.element(page.getByRole("tab", { name: "Diff" })).toHaveFocus();
  });

  it("says when not every replacement is located", async () => {
    render(PreviewPane, { ...props, note: "the first 10000 of 10005 replacements are located" });
    await expect.element(page.getByText("the first 10000 of 10005")).toBeVisible();
  });
});

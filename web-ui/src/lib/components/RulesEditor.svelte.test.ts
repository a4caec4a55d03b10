import { describe, expect, it } from "vitest";
import { page, userEvent } from "vitest/browser";
import { render } from "vitest-browser-svelte";
import RulesEditor from "./RulesEditor.svelte";

const rules = () => [
  { pattern: "hello", replacement: "HOWDY", flags: "g" },
  { pattern: "é(ab", replacement: "x", flags: "g" },
];

describe("RulesEditor", () => {
  it("puts the engine's error on its rule with a caret at its position", async () => {
    render(RulesEditor, {
      rules: rules(),
      problem: { index: 1, field: "pattern", message: "unclosed group at byte 2", at: 1 },
    });
    await expect.element(page.getByRole("alert")).toHaveTextContent("unclosed group");
    expect(document.querySelector(".caret")?.textContent).toBe(" ^");
    await expect.element(page.getByLabelText("Rule 2 pattern")).toHaveAttribute("aria-invalid", "true");
    await expect.element(page.getByLabelText("Rule 1 pattern")).not.toHaveAttribute("aria-invalid");
  });

  it("checks flags and empty patterns in the browser", async () => {
    render(RulesEditor, {
      rules: [
        { pattern: "", replacement: "", flags: "g" },
        { pattern: "a", replacement: "", flags: "gx" },
      ],
    });
    const alerts = page.getByRole("alert");
    await expect.element(alerts.nth(0)).toHaveTextContent("a pattern is needed");
    await expect.element(alerts.nth(1)).toHaveTextContent("flags are g");
  });

  it("moves, adds and removes rules from the keyboard", async () => {
    render(RulesEditor, { rules: rules() });
    (page.getByLabelText("Rule 1 pattern").element() as HTMLElement).focus();
    await userEvent.keyboard("{Alt>}{ArrowDown}{/Alt}");
    await expect.element(page.getByLabelText("Rule 2 pattern")).toHaveValue("hello");
    await expect.element(page.getByLabelText("Rule 2 pattern")).toHaveFocus();
    await userEvent.keyboard("{Control>}{Enter}{/Control}");
    await expect.element(page.getByLabelText("Rule 3 pattern")).toHaveValue("");
    await expect.element(page.getByLabelText("Rule 3 pattern")).toHaveFocus();
    await userEvent.keyboard("{Control>}{Delete}{/Control}");
    expect(document.querySelectorAll("tbody input[data-field=pattern]")).toHaveLength(2);
  });

  it("shows each rule's count", async () => {
    render(RulesEditor, { rules: rules(), counts: [3, 0] });
    await expect.element(page.getByTestId("matches-0")).toHaveTextContent("3");
    await expect.element(page.getByTestId("matches-1")).toHaveTextContent("0");
  });
});

import { describe, expect, it, vi } from "vitest";
import { page, userEvent } from "vitest/browser";
import { render } from "vitest-browser-svelte";
import { ApiError } from "$lib/api/client";
import InlineEdit from "./InlineEdit.svelte";

const phone = (v: string) => (/^[0-9 +()-]{5,32}$/.test(v) ? null : "5 to 32 digits");

describe("InlineEdit", () => {
  it("opens on Enter, saves on Enter, and gives focus back", async () => {
    const onsave = vi.fn(async () => {});
    render(InlineEdit, { value: "12345", label: "Phone", check: phone, onsave });
    const cell = page.getByRole("button", { name: /Phone: 12345/ });
    (cell.element() as HTMLElement).focus();
    await userEvent.keyboard("{Enter}");
    const input = page.getByRole("textbox", { name: "Phone" });
    await expect.element(input).toHaveFocus();
    await userEvent.fill(input, "+1 555 0100");
    await userEvent.keyboard("{Enter}");
    expect(onsave).toHaveBeenCalledWith("+1 555 0100");
    await expect.element(page.getByRole("button", { name: /Phone/ })).toHaveFocus();
  });

  it("cancels on Escape without saving", async () => {
    const onsave = vi.fn(async () => {});
    render(InlineEdit, { value: "12345", label: "Phone", onsave });
    await page.getByRole("button", { name: /Phone/ }).click();
    await userEvent.fill(page.getByRole("textbox", { name: "Phone" }), "99999");
    await userEvent.keyboard("{Escape}");
    expect(onsave).not.toHaveBeenCalled();
    await expect.element(page.getByRole("button", { name: /Phone: 12345/ })).toBeVisible();
  });

  it("refuses in the browser what the check refuses", async () => {
    const onsave = vi.fn(async () => {});
    render(InlineEdit, { value: "12345", label: "Phone", check: phone, onsave });
    await page.getByRole("button", { name: /Phone/ }).click();
    await userEvent.fill(page.getByRole("textbox", { name: "Phone" }), "abc");
    await expect.element(page.getByRole("alert")).toHaveTextContent("5 to 32 digits");
    await userEvent.keyboard("{Enter}");
    expect(onsave).not.toHaveBeenCalled();
  });

  it("shows the server's refusal and stays open", async () => {
    const onsave = vi.fn(async () => {
      throw new ApiError(409, "the client changed meanwhile: reload to see it", "version");
    });
    render(InlineEdit, { value: "a@x.io", label: "E-mail", onsave });
    await page.getByRole("button", { name: /E-mail/ }).click();
    await userEvent.fill(page.getByRole("textbox", { name: "E-mail" }), "b@x.io");
    await userEvent.keyboard("{Enter}");
    await expect.element(page.getByRole("alert")).toHaveTextContent("changed meanwhile");
    await expect.element(page.getByRole("textbox", { name: "E-mail" })).toHaveValue("b@x.io");
    // The field has the focus again: Escape closes it.
    await expect.element(page.getByRole("textbox", { name: "E-mail" })).toHaveFocus();
    await userEvent.keyboard("{Escape}");
    await expect.element(page.getByRole("button", { name: /E-mail: a@x.io/ })).toBeVisible();
  });

  it("edits a choice with a select", async () => {
    const onsave = vi.fn(async () => {});
    const options = [
      { value: "1", label: "Basic" },
      { value: "2", label: "Pro" },
    ];
    render(InlineEdit, { value: "1", label: "Tariff", options, onsave });
    await page.getByRole("button", { name: /Tariff: Basic/ }).click();
    await userEvent.selectOptions(page.getByRole("combobox", { name: "Tariff" }), "2");
    await userEvent.keyboard("{Enter}");
    expect(onsave).toHaveBeenCalledWith("2");
  });

  it("shows markup as text", async () => {
    render(InlineEdit, { value: "<img src=x onerror=alert(1)>", label: "Note", onsave: async () => {} });
    expect(document.querySelector("img")).toBeNull();
    await expect.element(page.getByText("<img src=x onerror=alert(1)>")).toBeVisible();
  });
});

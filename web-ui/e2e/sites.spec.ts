import { expect, test } from "@playwright/test";
import { env, login, serve, shot } from "./env";

test("a tenant edits a rule, previews it on a page, activates it, and the site's answers change", async ({
  page,
}) => {
  const tenant = env.tenant();
  await login(page, env.tenantLogin());
  await page.getByRole("link", { name: "Sites" }).click();
  await expect(page).toHaveURL(new RegExp(`/t/${tenant}/sites$`));

  // A site proxying www.acme.test to the node's own listener (the echo).
  await page.getByLabel("Name").fill("mirror");
  await page.getByLabel("Hosts").fill("www.acme.test:80");
  await expect(page.getByText("no port or path")).toBeVisible();
  await page.getByLabel("Hosts").fill("www.acme.test");
  await page.getByLabel("Origin").fill(env.serveUrl());
  await page.getByRole("button", { name: "Create site" }).click();
  await expect(page).toHaveURL(new RegExp(`/t/${tenant}/sites/mirror$`));
  expect(await serve("/page", "www.acme.test")).toEqual({ status: 200, body: "hello from edge: /page\n" });

  // A broken pattern: the engine's error on its rule, a caret where it points.
  const pattern = page.getByLabel("Rule 1 pattern");
  await pattern.fill("(hel");
  await expect(page.getByRole("alert")).toContainText("unclosed group");
  await expect(page.locator(".caret")).toHaveText("^");
  await pattern.fill("hello");
  await page.getByLabel("Rule 1 replacement").fill("HOWDY");
  await expect(page.getByRole("alert")).toHaveCount(0);

  // A page fetched from the origin (unrewritten), the rule previewed on it.
  await page.getByLabel("Fetch from the origin").fill("/page");
  await page.getByRole("button", { name: "Fetch", exact: true }).click();
  await expect(page.getByText("GET /page: 200")).toBeVisible();
  await expect(page.getByLabel(/A page to try the rules on/)).toHaveValue("hello from edge: /page\n");
  await expect(page.getByTestId("preview-text")).toHaveText("HOWDY from edge: /page\n");

  // The preview: the page pasted, replacements highlighted and counted.
  await page.getByLabel(/A page to try the rules on/).fill("<p>hello a, hello b</p>");
  await expect(page.getByTestId("replacements")).toHaveText("2 replacements");
  await expect(page.getByTestId("matches-0")).toHaveText("2");
  await expect(page.getByTestId("preview-text").locator("mark")).toHaveCount(2);
  await expect(page.getByTestId("preview-text")).toHaveText("<p>HOWDY a, HOWDY b</p>");
  // Markup in the page is shown as text, never rendered.
  await expect(page.getByTestId("preview-text").locator("p")).toHaveCount(0);
  await page.getByRole("tab", { name: "Diff" }).click();
  await expect(page.locator(".removed")).toContainText("- <p>hello a, hello b</p>");
  await expect(page.locator(".added")).toContainText("+ <p>HOWDY a, HOWDY b</p>");
  await page.getByRole("tab", { name: "Output" }).click();
  await shot(page, "site");

  // Saved and activated: the site answers with the rule applied.
  await page.getByRole("button", { name: "Save and activate" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Saved" })).toHaveText("Saved as version 1; it serves.");
  await expect(page.getByTestId("serving-rules")).toHaveText("serving rules v1");
  await expect.poll(async () => (await serve("/page", "www.acme.test")).body).toBe("HOWDY from edge: /page\n");

  // nginx lines imported into the editor, saved, activated.
  await page.getByRole("button", { name: "Import nginx…" }).click();
  await page.getByLabel(/nginx/).fill("subs_filter 'edge' 'EDGE';");
  await page.getByRole("button", { name: "Replace the rules with these" }).click();
  await expect(page.getByLabel("Rule 1 pattern")).toHaveValue("edge");
  await expect(page.getByLabel("Rule 1 replacement")).toHaveValue("EDGE");
  await page.getByRole("button", { name: "Save and activate" }).click();
  await expect(page.getByTestId("serving-rules")).toHaveText("serving rules v2");
  await expect.poll(async () => (await serve("/page", "www.acme.test")).body).toBe("hello from EDGE: /page\n");

  // Rolled back to version 1.
  await page.getByRole("button", { name: "Roll back" }).click();
  await expect(page.getByTestId("serving-rules")).toHaveText("serving rules v1");
  await expect.poll(async () => (await serve("/page", "www.acme.test")).body).toBe("HOWDY from edge: /page\n");
  await shot(page, "site-versions");

  await page.goto(`/t/${tenant}/sites`);
  await expect(page.getByRole("link", { name: "mirror" })).toBeVisible();
  await shot(page, "sites");
});

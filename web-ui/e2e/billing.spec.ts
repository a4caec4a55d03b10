import { expect, test, type Page } from "@playwright/test";
import { env, shot } from "./env";

/** The billing app's host: a *.localhost name (a secure context, so its Secure cookie is kept; Chromium resolves it to loopback). */
const billing = (path: string) => `http://${process.env.EDGE_BILLING_HOST}:${new URL(env.serveUrl()).port}${path}`;
const password = () => process.env.EDGE_BILLING_PASSWORD!;

async function logIn(page: Page, login: string, pw = password()) {
  await page.goto(billing("/billing/login"));
  await page.getByLabel("Login").fill(login);
  await page.getByLabel("Password").fill(pw);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page).toHaveURL(/\/billing$/);
}

const firstNames = (page: Page) => page.locator("tbody tr td:first-child a").allTextContents();

test("a dealer sorts, filters and searches clients, edits a phone in place, registers a client, opens payments", async ({
  page,
  browser,
}) => {
  page.on("dialog", (d) => {
    throw new Error(`a dialog opened: ${d.message()} (markup ran as code)`);
  });
  await logIn(page, "dealer1@billing.test");
  const total = page.getByTestId("total");
  await expect(total).toHaveText(/^[\d,]+ clients\s*$/);
  const all = Number((await total.textContent())!.replace(/\D/g, ""));

  // Sorted by name (the URL keeps it; a reload keeps the view).
  await page.getByRole("button", { name: /^Client/ }).click();
  await expect(page).toHaveURL(/sort=name/);
  await expect(page.getByRole("columnheader", { name: /Client/ })).toHaveAttribute("aria-sort", "ascending");
  const sorted = (n: string[]) => n.length > 1 && n.every((x, i) => i === 0 || n[i - 1]! <= x);
  await expect.poll(async () => sorted(await firstNames(page))).toBe(true);
  const names = await firstNames(page);
  await page.reload();
  await expect.poll(() => firstNames(page)).toEqual(names);

  // Searched: every row matches, fewer than all.
  const needle = names[0]!.split(" ")[0]!;
  await page.getByLabel("Search").fill(needle);
  await expect(page).toHaveURL(new RegExp(`q=${encodeURIComponent(needle)}`));
  await expect.poll(async () => Number((await total.textContent())!.replace(/\D/g, ""))).toBeLessThan(all);
  for (const row of await page.locator("tbody tr").allTextContents()) expect(row.toLowerCase()).toContain(needle.toLowerCase());
  // The CSV export carries the same filters.
  await expect(page.getByRole("link", { name: "Export CSV" })).toHaveAttribute("href", new RegExp(`q=${encodeURIComponent(needle)}`));
  await page.getByLabel("Search").fill("");
  await expect.poll(async () => Number((await total.textContent())!.replace(/\D/g, ""))).toBe(all);

  // Registered in a date range: fewer again.
  await page.getByRole("button", { name: "Last 30 days" }).click();
  await expect(page).toHaveURL(/registered_from=/);
  await page.getByRole("button", { name: "Any time" }).click();

  // A phone edited in place: refused as typed, then saved, and kept after a reload.
  const name = names[0]!;
  await page.getByRole("button", { name: new RegExp(`^Phone of ${escape(name)}`) }).click();
  const phone = page.getByRole("textbox", { name: `Phone of ${name}` });
  await phone.fill("call me");
  await expect(page.getByRole("alert")).toContainText("5 to 32");
  await phone.fill("+1 555 0100");
  await phone.press("Enter");
  await expect(page.getByRole("button", { name: new RegExp(`^Phone of ${escape(name)}: \\+1 555 0100`) })).toBeVisible();
  await page.reload();
  await expect(page.getByRole("button", { name: new RegExp(`^Phone of ${escape(name)}: \\+1 555 0100`) })).toBeVisible();
  await shot(page, "billing-clients");

  // The same row changed meanwhile in another window: the edit here is refused, the row shows theirs.
  const other = await browser.newPage();
  await logIn(other, "dealer1@billing.test");
  await other.goto(billing("/billing?sort=name"));
  await other.getByRole("button", { name: new RegExp(`^Contact of ${escape(name)}`) }).click();
  await other.getByRole("textbox", { name: `Contact of ${name}` }).fill("Changed Elsewhere");
  await other.getByRole("textbox", { name: `Contact of ${name}` }).press("Enter");
  await expect(other.getByRole("button", { name: /Changed Elsewhere/ })).toBeVisible();
  await other.close();
  await page.getByRole("button", { name: new RegExp(`^Contact of ${escape(name)}`) }).click();
  await page.getByRole("textbox", { name: `Contact of ${name}` }).fill("Mine");
  await page.getByRole("textbox", { name: `Contact of ${name}` }).press("Enter");
  await expect(page.getByText("was changed by someone else meanwhile")).toBeVisible();
  await page.keyboard.press("Escape");
  await expect(page.getByRole("button", { name: /Changed Elsewhere/ })).toBeVisible();

  // A client's payments, each signature checked.
  await page.getByRole("link", { name, exact: true }).click();
  await expect(page.getByRole("heading", { name })).toBeVisible();
  await expect(page.getByTestId("payments-total")).toContainText("payment");
  await expect(page.locator(".badge.ok", { hasText: "verified" }).first()).toBeVisible();
  await expect(page.getByText("NOT VERIFIED")).toHaveCount(0);
  await shot(page, "billing-client");

  // Registering a client whose name holds markup: kept and shown as text.
  await page.getByRole("link", { name: "Register a client" }).click();
  await page.getByRole("button", { name: "Register" }).click();
  await expect(page.getByText("a name is needed")).toBeVisible();
  const marked = `<img src=x onerror=alert(1)> Ltd ${Date.now()}`;
  await page.getByLabel("Client name").fill(marked);
  await page.getByLabel("Contact name").fill("Ada");
  await page.getByLabel("Phone").fill("+44 20 7946 0000");
  await page.getByLabel("E-mail").fill("not an address");
  await expect(page.getByText("an e-mail address")).toBeVisible();
  await page.getByLabel("E-mail").fill("ada@example.com");
  await page.getByLabel("Tariff").selectOption({ index: 1 });
  await shot(page, "billing-new");
  await page.getByRole("button", { name: "Register" }).click();
  await expect(page.getByRole("heading", { name: marked })).toBeVisible();
  expect(await page.locator("img").count()).toBe(0);

  // Another dealer's client: as if it did not exist.
  await page.goto(billing(`/billing/clients/${process.env.EDGE_OTHER_DEALERS_CLIENT}`));
  await expect(page.getByRole("alert").first()).toContainText("404");
});

test("an admin sees every dealer's clients, the dealers, tariffs and all payments", async ({ page }) => {
  await logIn(page, "admin@billing.test");
  await expect(page.getByRole("columnheader", { name: "Dealer" })).toBeVisible();
  await page.getByRole("link", { name: "Dealers" }).click();
  await expect(page.getByRole("table", { name: "Dealers" }).getByRole("row")).toHaveCount(6); // a header and five dealers
  await shot(page, "billing-dealers");
  await page.getByRole("link", { name: "Tariffs" }).click();
  await expect(page.getByRole("row").nth(1)).toBeVisible();
  await page.getByRole("link", { name: "All payments" }).click();
  await expect(page.getByRole("status")).toHaveText(/[\d,]+ payments/);
  await expect(page.getByText("NOT VERIFIED")).toHaveCount(0);
  await shot(page, "billing-payments");
});

test("an admin adds a dealer's login, disables it (its session ends), enables it and sets its password", async ({
  page,
  browser,
}) => {
  await logIn(page, "admin@billing.test");
  await page.getByRole("link", { name: "Dealers" }).click();
  // Its own login (a retried test makes another).
  const who = `e2e-${Date.now()}@billing.test`;
  await page.getByLabel("Login for").selectOption({ index: 1 });
  await page.getByLabel("Login", { exact: true }).fill(who);
  await page.getByLabel("Password", { exact: true }).fill(password());
  await page.getByRole("button", { name: "Add login" }).click();
  await expect(page.getByText(`${who} can log in.`)).toBeVisible();
  const row = page.getByRole("table", { name: "Logins" }).getByRole("row").filter({ hasText: who });
  await expect(row).toContainText("active");
  // The admin cannot disable their own login.
  await expect(page.getByRole("button", { name: "Disable admin@billing.test" })).toHaveCount(0);

  // The dealer, in a browser of their own.
  const dealer = await (await browser.newContext()).newPage();
  await logIn(dealer, who);
  const me = () => dealer.evaluate(async () => (await fetch("/api/me")).status);
  expect(await me()).toBe(200);

  await row.getByRole("button", { name: `Disable ${who}` }).click();
  await expect(row).toContainText("disabled");
  expect(await me()).toBe(401);
  await dealer.goto(billing("/billing/login"));
  await dealer.getByLabel("Login").fill(who);
  await dealer.getByLabel("Password").fill(password());
  await dealer.getByRole("button", { name: "Log in" }).click();
  await expect(dealer.getByRole("alert")).toContainText("wrong login or password");

  await row.getByRole("button", { name: `Enable ${who}` }).click();
  await expect(row).toContainText("active");
  await page.getByLabel("New password for").selectOption({ label: who });
  await page.getByLabel("New password", { exact: true }).fill("another long password");
  await page.getByRole("button", { name: "Set password" }).click();
  await expect(page.getByText(`${who} has a new password; their sessions ended.`)).toBeVisible();
  await shot(page, "billing-logins");
  await logIn(dealer, who, "another long password");
  expect(await me()).toBe(200);
});

test("a dealer's session is refused the admin's endpoints and every change without its CSRF token", async ({ page }) => {
  await logIn(page, "dealer2@billing.test");
  const status = (method: string, path: string, headers: Record<string, string> = {}) =>
    page.evaluate(
      async ([method, path, headers]) =>
        (
          await fetch(path, {
            method,
            headers: { "content-type": "application/json", ...headers },
            body: method === "GET" ? undefined : "{}",
          })
        ).status,
      [method, path, headers] as const,
    );
  expect(await status("GET", "/api/dealers")).toBe(403);
  expect(await status("GET", "/api/payments")).toBe(403);
  expect(await status("GET", "/api/users")).toBe(403);
  expect(await status("PATCH", "/api/users/1")).toBe(403); // no CSRF token
  expect(await status("GET", "/api/clients?sort=name;DROP TABLE clients")).toBe(400);
  expect(await status("POST", "/api/clients")).toBe(403); // no CSRF token
  expect(await status("POST", "/api/clients", { "x-csrf-token": "forged" })).toBe(403);
  await page.goto(billing("/billing/admin/dealers"));
  await expect(page.getByRole("alert").first()).toContainText("403");
});

function escape(s: string) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

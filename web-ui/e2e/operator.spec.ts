import { expect, test } from "@playwright/test";
import { env, login, serve, shot } from "./env";

test("an operator manages a tenant's quota and access, reads the audit log, health and a tenant's metrics", async ({
  page,
}) => {
  // Some traffic for the metrics (the apps test deployed `web`).
  for (let i = 0; i < 20; i++) await serve(`/m${i}`);

  await login(page, env.operatorLogin());
  await expect(page).toHaveURL(/\/operator\/tenants$/);
  await page.getByRole("link", { name: env.tenant(), exact: true }).click();
  await expect(page.getByRole("heading", { name: env.tenant() })).toBeVisible();

  // The quota: refused in the browser as the API would, then saved.
  const apps = page.getByLabel(/^Apps/);
  await apps.fill("0");
  await expect(page.getByText("at least 1")).toBeVisible();
  await expect(page.getByRole("button", { name: "Save quota" })).toBeDisabled();
  await apps.fill("7");
  const files = page.getByLabel(/^Open files/);
  await files.fill("2000000");
  await expect(page.getByText("at most 1048576")).toBeVisible();
  await expect(page.getByRole("button", { name: "Save quota" })).toBeDisabled();
  await files.fill("256");
  await page.getByLabel(/Instances at once/).fill("30");
  await page.getByRole("button", { name: "Save quota" }).click();
  await expect(page.getByText("Saved.")).toBeVisible();
  await page.reload();
  await expect(page.getByLabel(/^Apps/)).toHaveValue("7");
  await expect(page.getByLabel(/Instances at once/)).toHaveValue("30");
  await expect(page.getByLabel(/^Open files/)).toHaveValue("256");
  await shot(page, "tenant");

  // A token for the tenant, shown once; then revoked.
  await page.getByLabel("New token").fill("deploys");
  await page.getByRole("button", { name: "Make token" }).click();
  await expect(page.getByTestId("new-token")).toHaveText(/^edge_/);
  await page.getByRole("button", { name: "Revoke token deploys" }).click();
  await expect(page.getByRole("row", { name: /deploys/ })).toContainText("revoked");

  // The audit log, filtered; the filter survives a reload (it is in the URL).
  await page.getByRole("link", { name: "Audit log" }).first().click();
  await page.getByLabel("Action").fill("tenant.update");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/action=tenant.update/);
  await expect(page.getByRole("row", { name: /tenant\.update/ })).toHaveCount(1);
  await page.reload();
  await expect(page.getByLabel("Action")).toHaveValue("tenant.update");
  await expect(page.getByRole("row", { name: /tenant\.update/ })).toHaveCount(1);
  await shot(page, "audit");

  await page.getByRole("link", { name: "PoP health" }).click();
  await expect(page.getByTestId("health-status")).toHaveText("ok");
  await shot(page, "health");

  // A tenant's metrics, as the operator sees them.
  await page.goto(`/t/${env.tenant()}/metrics?app=web`);
  await expect(page.getByTestId("totals-web")).toContainText("requests", { timeout: 20_000 });
  await expect(page.locator(".uplot")).toHaveCount(3);
  await shot(page, "metrics");
});

test("a tenant's session reaches its own tenant only, and changes need the CSRF token", async ({ page }) => {
  // A cookie planted before login is never the session afterwards.
  const origin = new URL(process.env.EDGE_CONSOLE_URL!);
  await page.context().addCookies([{ name: "edge_session", value: "planted", domain: origin.hostname, path: "/" }]);
  await login(page, env.tenantLogin());
  await expect(page).toHaveURL(new RegExp(`/t/${env.tenant()}/apps$`));
  const cookie = (await page.context().cookies()).find((c) => c.name === "edge_session");
  expect(cookie?.value).not.toBe("planted");
  expect(cookie?.httpOnly).toBe(true);
  expect(cookie?.sameSite).toBe("Strict");

  const status = (method: string, path: string, headers: Record<string, string> = {}) =>
    page.evaluate(
      async ([method, path, headers]) =>
        (await fetch(path, { method, headers: { "content-type": "application/json", ...headers }, body: method === "GET" ? undefined : "{}" }))
          .status,
      [method, path, headers] as const,
    );
  // Operator pages' endpoints: refused.
  expect(await status("GET", "/v1/tenants")).toBe(200); // lists its own tenant only
  expect(await status("GET", "/v1/audit")).toBe(403);
  expect(await status("GET", "/v1/health")).toBe(403);
  // Another tenant's objects: as if they did not exist.
  expect(await status("GET", "/v1/tenants/operator-only/apps")).toBe(404);
  // A change without the CSRF token, or with a wrong one, is refused:
  // every state-changing endpoint the API documents, tried from the page.
  const refusals = await page.evaluate(async (tenant) => {
    const doc = (await (await fetch("/v1/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
    const out: string[] = [];
    let tried = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops)) {
        if (method === "get" || path === "/v1/login") continue;
        const url = path
          .replace("{tenant}", tenant)
          .replace("{app}", "web")
          .replace("{site}", "mirror")
          .replace(/\{(name|id|number)\}/, "1");
        for (const token of [null, "forged"]) {
          const headers: Record<string, string> = { "content-type": "application/json" };
          if (token) headers["x-csrf-token"] = token;
          const r = await fetch(url, { method: method.toUpperCase(), headers, body: "{}" });
          tried++;
          const text = await r.text();
          if (r.status !== 403 || !text.includes("CSRF")) out.push(`${method.toUpperCase()} ${url} (${token ?? "no token"}): ${r.status} ${text}`);
        }
      }
    }
    return { out, tried };
  }, env.tenant());
  expect(refusals.out).toEqual([]);
  expect(refusals.tried).toBeGreaterThan(50); // every change the API documents, twice
  // The console shows the API's refusal on an operator page.
  await page.goto("/operator/health");
  await expect(page.getByRole("alert")).toContainText("only an operator");
});

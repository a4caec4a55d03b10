// What tests/tests/console.rs hands the browser tests.
import { request as httpRequest } from "node:http";
import AxeBuilder from "@axe-core/playwright";
import { expect, type Page } from "@playwright/test";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through tests/tests/console.rs`);
  return v;
}

export const env = {
  /** The node's application listener. */
  serveUrl: () => need("EDGE_SERVE_URL"),
  tenant: () => need("EDGE_TENANT"),
  tenantHost: () => need("EDGE_TENANT_HOST"),
  tenantLogin: () => need("EDGE_TENANT_LOGIN"),
  operatorLogin: () => need("EDGE_OPERATOR_LOGIN"),
  password: () => need("EDGE_PASSWORD"),
  components: () => need("EDGE_COMPONENTS"),
  /** Names this run's screenshots (sqlite, mariadb). */
  label: () => process.env.EDGE_E2E_LABEL ?? "run",
};

/** GET `path` from one of the tenant's hosts through the node (a Host header a browser cannot set). */
export function serve(path: string, host = env.tenantHost()): Promise<{ status: number; body: string }> {
  const url = new URL(path, env.serveUrl());
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

export async function login(page: Page, login: string) {
  await page.goto("/login");
  await page.getByLabel("Login").fill(login);
  await page.getByLabel("Password").fill(env.password());
  await page.getByRole("button", { name: "Log in" }).click();
}

/**
 * Saves a screenshot of a main page under e2e/screenshots/, and checks the
 * page with axe (WCAG 2.1 A and AA): no serious or critical violation.
 */
export async function shot(page: Page, name: string) {
  await page.screenshot({ path: `e2e/screenshots/${env.label()}-${name}.png`, fullPage: true });
  const audit = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]).analyze();
  const serious = audit.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help}; ${v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")}`);
  expect(serious, `accessibility of ${name}`).toEqual([]);
}

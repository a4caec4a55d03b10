// The JavaScript a first visit transfers, compressed as sent, in Debian's
// chromium with an empty cache: the console (its login page, then the
// apps page after logging in) and the billing workspace (login, clients).
// Usage: node first-load.mjs CONSOLE_URL LOGIN PASSWORD BILLING_URL BLOGIN BPASSWORD
import { chromium } from "playwright";

const [consoleUrl, login, password, billingUrl, blogin, bpassword] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});

async function measure(url, who, pass, landing) {
  const context = await browser.newContext();
  const page = await context.newPage();
  let js = 0;
  let all = 0;
  page.on("requestfinished", async (req) => {
    const sizes = await req.sizes().catch(() => null);
    if (!sizes) return;
    const bytes = sizes.responseBodySize; // as transferred (compressed)
    all += bytes + sizes.responseHeadersSize;
    if (req.resourceType() === "script") js += bytes;
  });
  await page.goto(url, { waitUntil: "networkidle" });
  const loginJs = js;
  await page.getByLabel("Login").fill(who);
  await page.getByLabel("Password").fill(pass);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL(landing);
  await page.waitForLoadState("networkidle");
  await context.close();
  return { loginJs, js, all };
}

const c = await measure(`${consoleUrl}/login`, login, password, /\/(apps|operator\/tenants)$/);
const b = await measure(`${billingUrl}/billing/login`, blogin, bpassword, /\/billing$/);
console.log(`RESULT console_login_js=${c.loginJs} console_js=${c.js} console_all=${c.all} billing_login_js=${b.loginJs} billing_js=${b.js} billing_all=${b.all}`);
await browser.close();

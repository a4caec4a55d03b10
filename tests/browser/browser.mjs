// Launches Debian's chromium headless through playwright-core, the way this
// machine allows: no bundled browser download, no network chatter, a fresh
// profile per run.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export async function withBrowser(run) {
  const profile = mkdtempSync(join(tmpdir(), "edge-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    return await run(page);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

/** Fails with `message` and what was found instead. */
export function check(ok, message, found) {
  if (!ok) throw new Error(`${message}; found: ${JSON.stringify(found)}`);
}

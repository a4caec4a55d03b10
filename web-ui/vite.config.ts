import { sveltekit } from "@sveltejs/kit/vite";
import { playwright } from "@vitest/browser-playwright";
import { defineConfig } from "vitest/config";

// Debian's chromium, launched the way this machine allows (no downloads,
// no background network chatter); CHROMIUM overrides the path.
const chromium = playwright({
  launchOptions: {
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  },
});

export default defineConfig({
  plugins: [sveltekit()],
  // `npm run dev` against a node's control API (make run: 127.0.0.1:8790).
  server: { proxy: { "/v1": process.env.EDGE_CONTROL_URL ?? "http://127.0.0.1:8790" } },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          environment: "node",
          include: ["src/**/*.test.ts"],
          exclude: ["src/**/*.svelte.test.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "component",
          include: ["src/**/*.svelte.test.ts"],
          // Prebundled up front: a dependency found mid-run reloads the page under a test.
          deps: { optimizer: { client: { enabled: true, include: ["@tanstack/svelte-table", "diff", "valibot", "vitest-browser-svelte"] } } },
          browser: {
            enabled: true,
            headless: true,
            provider: chromium,
            instances: [{ browser: "chromium" }],
          },
        },
      },
    ],
  },
});

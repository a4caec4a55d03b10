import { expect, test } from "@playwright/test";
import { env, login, serve, shot } from "./env";

test("a tenant logs in, uploads a component, sees it live and rolls back", async ({ page }) => {
  const tenant = env.tenant();
  await login(page, env.tenantLogin());
  await expect(page).toHaveURL(new RegExp(`/t/${tenant}/apps$`));
  await expect(page.getByRole("heading", { name: "Apps" })).toBeVisible();

  // A new app; a bad name is refused as you type.
  await page.getByLabel("New app").fill("Web!");
  await expect(page.getByText("starting with a letter")).toBeVisible();
  await expect(page.getByRole("button", { name: "Create app" })).toBeDisabled();
  await page.getByLabel("New app").fill("web");
  await page.getByRole("button", { name: "Create app" }).click();
  await expect(page).toHaveURL(new RegExp(`/t/${tenant}/apps/web$`));
  await expect(page.getByText("not deployed")).toBeVisible();

  // Something that is not a component: the API's own words.
  await page.locator('input[type="file"]').setInputFiles({
    name: "broken.wasm",
    mimeType: "application/wasm",
    buffer: Buffer.from("not wasm at all"),
  });
  await expect(page.getByRole("alert")).toContainText("422");
  await expect(page.getByText("not deployed")).toBeVisible();

  // The echo component, dropped on the drop zone, smoke-checked, live.
  const echo = await readFile(`${env.components()}/echo.wasm`);
  const dropped = await page.evaluateHandle(
    ([bytes]) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(bytes)], "echo.wasm", { type: "application/wasm" }));
      return dt;
    },
    [Array.from(echo)],
  );
  await page.getByRole("group", { name: /a component/ }).dispatchEvent("drop", { dataTransfer: dropped });
  await expect(page.getByRole("status")).toContainText("Version 1 made. Deployment 1 serves v1 after the smoke check");
  await expect(page.getByTestId("serving")).toHaveText("serving v1");
  expect((await serve("/hi")).body).toMatch(/^hello from edge/);
  await shot(page, "app");

  // A second version, all at once.
  await page.locator('input[type="file"]').setInputFiles(`${env.components()}/fixtures.wasm`);
  await expect(page.getByRole("status")).toContainText("Version 2 made");
  await expect(page.getByTestId("serving")).toHaveText("serving v2");
  expect(await serve("/")).toEqual({ status: 200, body: "ok\n" });

  // Roll back: the echo answers again.
  await page.getByRole("button", { name: "Roll back" }).click();
  await expect(page.getByRole("status")).toContainText("Rolled back");
  await expect(page.getByTestId("serving")).toHaveText("serving v1");
  expect((await serve("/hi")).body).toMatch(/^hello from edge/);

  // A gradual rollout of version 2 at 10 %, moved to 30 % with the slider.
  await page.getByRole("row", { name: /v2/ }).getByRole("button", { name: "Roll out 10%" }).click();
  await expect(page.getByTestId("serving")).toHaveText("serving v2 10% · v1 90%");
  await page.getByLabel(/Version 2: \d+%/).fill("30");
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page.getByTestId("serving")).toHaveText("serving v2 30% · v1 70%");
  await shot(page, "rollout");

  // After a reload the session (and its CSRF token) still work.
  await page.reload();
  await page.getByRole("button", { name: "Promote to 100%" }).click();
  await expect(page.getByTestId("serving")).toHaveText("serving v2");

  await page.goto(`/t/${tenant}/apps`);
  await expect(page.getByRole("link", { name: "web" })).toBeVisible();
  await shot(page, "apps");
});

async function readFile(path: string): Promise<Buffer> {
  const { readFile } = await import("node:fs/promises");
  return readFile(path);
}

// The hint engine's demo page in a real browser: suggestions arrive while
// typing, arrows move the selection, Enter takes it (and asks again for the
// next part of the address), Escape closes the list, names agree in gender.
//
//   node hints-demo.mjs http://127.0.0.1:8080/hints/
import { withBrowser, check } from "./browser.mjs";

const url = process.argv[2];
if (!url) {
  console.error("usage: node hints-demo.mjs URL_OF_THE_DEMO_PAGE");
  process.exit(2);
}

const options = (page, list) => page.locator(`#${list} li`);
const texts = async (page, list) => options(page, list).allTextContents();

/** Waits until the list's first option contains `text`. */
async function firstIs(page, list, text) {
  try {
    await page.waitForFunction(
      ([id, t]) => document.querySelector(`#${id} li`)?.textContent.includes(t),
      [list, text],
      { timeout: 5000 },
    );
  } catch {
    check(false, `#${list}: first suggestion should contain ${JSON.stringify(text)}`, await texts(page, list));
  }
}

const selected = async (page, list) =>
  options(page, list).evaluateAll((lis) => lis.findIndex((li) => li.getAttribute("aria-selected") === "true"));

await withBrowser(async (page) => {
  const response = await page.goto(url);
  check(response.ok(), "the demo page loads", response.status());

  // Address: type, move, take.
  const address = page.locator("#address");
  await address.click();
  await address.pressSequentially("моск", { delay: 40 });
  await firstIs(page, "address-list", "Москва");
  check((await selected(page, "address-list")) === 0, "the first suggestion is selected", await selected(page, "address-list"));
  check((await address.getAttribute("aria-expanded")) === "true", "the combobox says it is open", await address.getAttribute("aria-expanded"));
  await address.press("ArrowDown");
  check((await selected(page, "address-list")) === 1, "ArrowDown selects the second", await selected(page, "address-list"));
  await address.press("ArrowUp");
  check((await selected(page, "address-list")) === 0, "ArrowUp goes back", await selected(page, "address-list"));
  await address.press("Enter");
  check((await address.inputValue()) === "г Москва, ", "Enter takes the suggestion", await address.inputValue());

  // The next part of the address, then the house.
  await address.pressSequentially("хабар", { delay: 40 });
  await firstIs(page, "address-list", "Хабаровская");
  await address.press("Enter");
  check((await address.inputValue()) === "г Москва, ул Хабаровская, ", "the street is taken", await address.inputValue());
  await address.pressSequentially("12", { delay: 40 });
  await firstIs(page, "address-list", "д 12");
  await address.press("Escape");
  check((await options(page, "address-list").count()) === 0, "Escape closes the list", await texts(page, "address-list"));
  check((await address.getAttribute("aria-expanded")) === "false", "the combobox says it is closed", await address.getAttribute("aria-expanded"));

  // Names: a female surname form goes with a female given name.
  const fio = page.locator("#fio");
  await fio.click();
  await fio.pressSequentially("петрова ан", { delay: 40 });
  await firstIs(page, "fio-list", "Петрова Ан");
  const first = await options(page, "fio-list").first().textContent();
  check(first.endsWith("ж"), "the first name suggestion is marked female", first);
  await fio.press("Enter");
  check((await fio.inputValue()).startsWith("Петрова Ан"), "Enter takes the name", await fio.inputValue());

  console.log(JSON.stringify({ ok: true, address: await address.inputValue(), fio: await fio.inputValue() }));
}).catch((e) => {
  console.error(e.message);
  process.exit(1);
});

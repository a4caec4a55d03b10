import { describe, expect, it } from "vitest";
import { ClientName, ContactName, DateDay, Email, Note, Phone } from "./billing-validate";
import { problem } from "./validate";

describe("billing validators", () => {
  it("phones", () => {
    expect(problem(Phone, "+7 (912) 345-67-89")).toBeNull();
    expect(problem(Phone, "12")).toMatch(/5 to 32/);
    expect(problem(Phone, "call me")).toMatch(/digits/);
    expect(problem(Phone, "1".repeat(33))).not.toBeNull();
  });
  it("e-mail", () => {
    expect(problem(Email, "a.b@example.com")).toBeNull();
    expect(problem(Email, "nope")).toMatch(/e-mail/);
    expect(problem(Email, `${"a".repeat(250)}@x.io`)).toMatch(/254/);
  });
  it("names, notes and dates", () => {
    expect(problem(ClientName, "  ")).toMatch(/needed/);
    expect(problem(ClientName, "<script>alert(1)</script>")).toBeNull(); // markup is text, shown as such
    expect(problem(ContactName, "x".repeat(201))).toMatch(/200/);
    expect(problem(Note, "x".repeat(2001))).toMatch(/2000/);
    expect(problem(DateDay, "2026-02-30")).not.toBeNull();
    expect(problem(DateDay, "2026-02-28")).toBeNull();
  });
});

import { describe, expect, it } from "vitest";
import { HostPattern, Login, Name, NewPassword, Percent, Route, SmokePath, Status, problem } from "./validate";

describe("validators", () => {
  it("names as the API's check_name", () => {
    expect(problem(Name, "web")).toBeNull();
    expect(problem(Name, "a-1_b")).toBeNull();
    expect(problem(Name, "1abc")).toMatch(/starting with a letter/);
    expect(problem(Name, "Web")).toMatch(/lower-case/);
    expect(problem(Name, "")).not.toBeNull();
    expect(problem(Name, "a".repeat(64))).not.toBeNull();
    expect(problem(Name, "a".repeat(63))).toBeNull();
    expect(problem(Name, "<script>")).not.toBeNull();
  });

  it("logins and passwords", () => {
    expect(problem(Login, "dealer@example.com")).toBeNull();
    expect(problem(Login, "has space")).toMatch(/visible ASCII/);
    expect(problem(Login, "")).toMatch(/needed/);
    expect(problem(NewPassword, "short")).toMatch(/12/);
    expect(problem(NewPassword, "ünïcödé-pässwörd")).toBeNull();
    expect(problem(NewPassword, "x".repeat(1025))).toMatch(/1024/);
  });

  it("rollout percent and smoke checks", () => {
    expect(problem(Percent, 10)).toBeNull();
    expect(problem(Percent, 0)).toMatch(/at least 1/);
    expect(problem(Percent, 101)).toMatch(/at most 100/);
    expect(problem(Percent, 2.5)).toMatch(/whole/);
    expect(problem(SmokePath, "/health?x=1")).toBeNull();
    expect(problem(SmokePath, "health")).toMatch(/starting with/);
    expect(problem(SmokePath, "/a b")).toMatch(/spaces/);
    expect(problem(Status, 204)).toBeNull();
    expect(problem(Status, 99)).toMatch(/HTTP status/);
  });

  it("host patterns and routes", () => {
    expect(problem(HostPattern, "Example.COM")).toBeNull();
    expect(problem(HostPattern, "*.acme.example")).toBeNull();
    expect(problem(HostPattern, "acme.example:8080")).toMatch(/no port/);
    expect(problem(HostPattern, "a.*.b")).not.toBeNull();
    expect(problem(Route, "/...")).toBeNull();
    expect(problem(Route, "/api/...")).toBeNull();
    expect(problem(Route, "api")).toMatch(/starts with/);
    expect(problem(Route, "/.../x")).toMatch(/may only end/);
  });
});

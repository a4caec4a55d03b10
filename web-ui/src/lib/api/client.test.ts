import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError, errorFrom, request, transport } from "./client";

afterEach(() => {
  vi.unstubAllGlobals();
  transport.csrf = null;
  transport.onUnauthorized = undefined;
});

describe("api client", () => {
  it("reads the servers' error shape, or makes one from the status", () => {
    const e = errorFrom(422, JSON.stringify({ error: { field: "rules[1].pattern", message: "unclosed group" } }));
    expect([e.status, e.field, e.message]).toEqual([422, "rules[1].pattern", "unclosed group"]);
    expect(errorFrom(502, "<html>bad gateway</html>").message).toBe("HTTP 502: <html>bad gateway</html>");
    expect(errorFrom(500, "").message).toBe("HTTP 500");
    const conflict = errorFrom(409, JSON.stringify({ error: { field: "version", message: "changed" }, current: { id: 1 } }));
    expect((conflict.body as { current: { id: number } }).current.id).toBe(1);
  });

  it("sends the CSRF token on changes only", async () => {
    const fetch = vi.fn(async () => new Response("{}", { status: 200 }));
    vi.stubGlobal("fetch", fetch);
    transport.csrf = "tok";
    await request("GET", "/v1/x");
    await request("POST", "/v1/x", { a: 1 });
    const headers = (i: number) => (fetch.mock.calls[i] as unknown as [string, RequestInit])[1].headers as Record<string, string>;
    expect(headers(0)["x-csrf-token"]).toBeUndefined();
    expect(headers(1)["x-csrf-token"]).toBe("tok");
    expect(headers(1)["content-type"]).toBe("application/json");
  });

  it("tells the session when the server says it ended", async () => {
    vi.stubGlobal("fetch", async () => new Response(JSON.stringify({ error: { field: null, message: "log in" } }), { status: 401 }));
    const ended = vi.fn();
    transport.onUnauthorized = ended;
    await expect(request("GET", "/v1/x")).rejects.toBeInstanceOf(ApiError);
    expect(ended).toHaveBeenCalled();
  });

  it("says when the server cannot be reached", async () => {
    vi.stubGlobal("fetch", async () => {
      throw new TypeError("fetch failed");
    });
    await expect(request("GET", "/v1/x")).rejects.toMatchObject({ status: 0 });
  });
});

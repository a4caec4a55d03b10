import { describe, expect, it, vi } from "vitest";
import { ApiError, transport } from "./api/client";
import { SessionOf } from "./session-of.svelte";

interface User {
  login: string;
  csrf_token?: string;
}

function calls(whoami: () => Promise<User>) {
  return {
    whoami: vi.fn(whoami),
    login: vi.fn(async () => ({ csrf_token: "from-login" })),
    logout: vi.fn(async () => null),
  };
}

describe("SessionOf", () => {
  it("knows the user the cookie belongs to, and its CSRF token", async () => {
    const s = new SessionOf<User>(calls(async () => ({ login: "ada", csrf_token: "t1" })));
    expect(s.ready).toBe(false);
    await s.load();
    expect(s.ready).toBe(true);
    expect(s.user?.login).toBe("ada");
    expect(transport.csrf).toBe("t1");
  });

  it("has no user without a session, and forgets the token", async () => {
    transport.csrf = "stale";
    const s = new SessionOf<User>(
      calls(async () => {
        throw new ApiError(401, "log in");
      }),
    );
    await s.load();
    expect(s.ready).toBe(true);
    expect(s.user).toBeNull();
    expect(transport.csrf).toBeNull();
  });

  it("passes other failures on (a server down is not a logged-out user)", async () => {
    const s = new SessionOf<User>(
      calls(async () => {
        throw new ApiError(0, "unreachable");
      }),
    );
    await expect(s.load()).rejects.toThrow("unreachable");
    expect(s.ready).toBe(true);
  });

  it("logs in, then asks who it is; logs out and forgets", async () => {
    let logged = false;
    const c = calls(async () => {
      if (!logged) throw new ApiError(401, "log in");
      return { login: "ada", csrf_token: "t2" };
    });
    c.login.mockImplementation(async () => {
      logged = true;
      return { csrf_token: "from-login" };
    });
    const s = new SessionOf<User>(c);
    await s.load();
    await s.login("ada", "secret");
    expect(c.login).toHaveBeenCalledWith("ada", "secret");
    expect(s.user?.login).toBe("ada");
    expect(transport.csrf).toBe("t2");
    await s.logout();
    expect(c.logout).toHaveBeenCalled();
    expect(s.user).toBeNull();
    expect(transport.csrf).toBeNull();
  });

  it("forgets the user when the server says the session ended", async () => {
    const s = new SessionOf<User>(calls(async () => ({ login: "ada", csrf_token: "t3" })));
    await s.load();
    s.expired();
    expect(s.user).toBeNull();
    expect(transport.csrf).toBeNull();
  });
});

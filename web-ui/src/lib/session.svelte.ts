// The console's session (the control plane's users).
import { api, type WhoAmI } from "./api/control";
import { SessionOf } from "./session-of.svelte";

export class Session extends SessionOf<WhoAmI> {
  constructor() {
    super({ whoami: api.whoami, login: api.login, logout: api.logout });
  }

  get isOperator() {
    return this.user?.role === "operator";
  }

  /** Where a caller starts: its tenant's apps, or an operator's tenants. */
  get home() {
    const u = this.user;
    if (!u) return "/login";
    return u.tenant ? `/t/${encodeURIComponent(u.tenant)}/apps` : "/operator/tenants";
  }
}

export const session = new Session();

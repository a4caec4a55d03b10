// The billing workspace's session (the billing app's own users, on its
// own host).
import { billing, type Me } from "./api/billing";
import { SessionOf } from "./session-of.svelte";

export class BillingSession extends SessionOf<Me> {
  constructor() {
    super({ whoami: billing.me, login: billing.login, logout: billing.logout });
  }

  get isAdmin() {
    return this.user?.role === "admin";
  }
}

export const billingSession = new BillingSession();

// Who is logged in to the billing app (a session of its own, on its own
// host): a rune class as the console's Session is.
import { ApiError, transport } from "./api/client";
import { billing, type Me } from "./api/billing";

export class BillingSession {
  #me = $state<Me | null>(null);
  #ready = $state(false);

  get me() {
    return this.#me;
  }
  get ready() {
    return this.#ready;
  }
  get isAdmin() {
    return this.#me?.role === "admin";
  }

  async load() {
    try {
      this.#accept(await billing.me());
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401) throw e;
      this.#forget();
    } finally {
      this.#ready = true;
    }
  }

  async login(login: string, password: string) {
    this.#accept(await billing.login(login, password));
  }

  async logout() {
    try {
      await billing.logout();
    } finally {
      this.#forget();
    }
  }

  expired() {
    this.#forget();
  }

  #accept(me: Me) {
    this.#me = me;
    transport.csrf = me.csrf_token;
  }

  #forget() {
    this.#me = null;
    transport.csrf = null;
  }
}

export const billingSession = new BillingSession();

// Who is logged in, shared by every page: a rune class with private
// state, read through getters (the pattern of svelte.dev's site-kit).
import { ApiError, transport } from "./api/client";
import { api, type WhoAmI } from "./api/control";

export class Session {
  #user = $state<WhoAmI | null>(null);
  #ready = $state(false);

  /** The caller, or null before login. */
  get user() {
    return this.#user;
  }

  /** Whether the first whoami has answered. */
  get ready() {
    return this.#ready;
  }

  get isOperator() {
    return this.#user?.role === "operator";
  }

  /** Where a caller starts: its tenant's apps, or an operator's tenants. */
  get home() {
    const u = this.#user;
    if (!u) return "/login";
    return u.tenant ? `/t/${encodeURIComponent(u.tenant)}/apps` : "/operator/tenants";
  }

  /** Asks the server who the session cookie belongs to. */
  async load() {
    try {
      this.#accept(await api.whoami());
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401) throw e;
      this.#forget();
    } finally {
      this.#ready = true;
    }
  }

  async login(login: string, password: string) {
    const r = await api.login(login, password);
    transport.csrf = r.csrf_token;
    await this.load();
  }

  async logout() {
    try {
      await api.logout();
    } finally {
      this.#forget();
    }
  }

  /** The server said the session is over. */
  expired() {
    this.#forget();
  }

  #accept(w: WhoAmI) {
    this.#user = w;
    if (w.csrf_token) transport.csrf = w.csrf_token;
  }

  #forget() {
    this.#user = null;
    transport.csrf = null;
  }
}

export const session = new Session();
transport.onUnauthorized = () => session.expired();

// A logged-in user, shared by every page of an app (the console, the
// billing workspace): a rune class with private state read through
// getters (the pattern of svelte.dev's site-kit). The server's session
// cookie is HttpOnly; what the page keeps is who it is and the CSRF token.
import { ApiError, transport } from "./api/client";

export interface Identity {
  csrf_token?: string;
}

export interface SessionCalls<U extends Identity> {
  /** Who the session cookie belongs to (401 when there is none). */
  whoami: () => Promise<U>;
  /** Logs in: the identity, or null to ask `whoami` afterwards. */
  login: (login: string, password: string) => Promise<U | { csrf_token: string } | null>;
  logout: () => Promise<unknown>;
}

export class SessionOf<U extends Identity> {
  #user = $state<U | null>(null);
  #ready = $state(false);
  #calls: SessionCalls<U>;

  constructor(calls: SessionCalls<U>) {
    this.#calls = calls;
  }

  /** The user, or null before login. */
  get user() {
    return this.#user;
  }

  /** Whether the first `whoami` has answered. */
  get ready() {
    return this.#ready;
  }

  /** Asks the server who the session cookie belongs to. */
  async load() {
    try {
      this.#accept(await this.#calls.whoami());
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401) throw e;
      this.#forget();
    } finally {
      this.#ready = true;
    }
  }

  async login(login: string, password: string) {
    const answer = await this.#calls.login(login, password);
    if (answer?.csrf_token) transport.csrf = answer.csrf_token;
    await this.load();
  }

  async logout() {
    try {
      await this.#calls.logout();
    } finally {
      this.#forget();
    }
  }

  /** The server said the session is over. */
  expired() {
    this.#forget();
  }

  #accept(u: U) {
    this.#user = u;
    if (u.csrf_token) transport.csrf = u.csrf_token;
  }

  #forget() {
    this.#user = null;
    transport.csrf = null;
  }
}

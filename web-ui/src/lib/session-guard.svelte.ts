// What an app's layout does with its session: asks the server who is
// logged in, has a 401 end the session, and sends every page but the
// login page to log in first (coming back afterwards).
import { goto } from "$app/navigation";
import { page } from "$app/state";
import { onMount } from "svelte";
import { transport } from "./api/client";
import type { Identity, SessionOf } from "./session-of.svelte";

/** Call from a layout's script; `failed` says why the server could not be asked. */
export function guardSession<U extends Identity>(session: SessionOf<U>, loginPath: string) {
  let failed = $state<string | null>(null);
  onMount(() => {
    transport.onUnauthorized = () => session.expired();
    session.load().catch((e) => (failed = String(e)));
  });
  $effect(() => {
    if (!session.ready || session.user || page.url.pathname === loginPath) return;
    goto(`${loginPath}?next=${encodeURIComponent(page.url.pathname + page.url.search)}`, { replaceState: true });
  });
  return {
    get failed() {
      return failed;
    },
  };
}

// Form checks the browser runs as you type, with the server's own rules
// and words. The server checks again: these only save a round trip.
import * as v from "valibot";

/** Names of tenants and apps (the API's `check_name`). */
export const Name = v.pipe(
  v.string(),
  v.regex(
    /^[a-z][a-z0-9_-]{0,62}$/,
    "1 to 63 lower-case letters, digits, '-' or '_', starting with a letter",
  ),
);

/** A login: 1 to 255 visible ASCII characters. */
export const Login = v.pipe(
  v.string(),
  v.nonEmpty("a login is needed"),
  v.maxLength(255, "at most 255 characters"),
  v.regex(/^[\x21-\x7e]+$/, "visible ASCII characters only (an e-mail address, a name)"),
);

/** A new password (the API wants at least 12 characters). */
export const NewPassword = v.pipe(
  v.string(),
  v.check((s) => [...s].length >= 12, "at least 12 characters"),
  v.maxBytes(1024, "at most 1024 bytes"),
);

/** A share of traffic for the new version in a gradual rollout. */
export const Percent = v.pipe(
  v.number("a number"),
  v.integer("a whole number"),
  v.minValue(1, "at least 1"),
  v.maxValue(100, "at most 100"),
);

/** A smoke request: a path starting with '/', and the status it must answer. */
export const SmokePath = v.pipe(
  v.string(),
  v.startsWith("/", "a path starting with '/'"),
  v.maxLength(2048, "at most 2048 characters"),
  v.regex(/^[\x21-\x7e]*$/, "no spaces or control characters (percent-encode them)"),
);
export const Status = v.pipe(
  v.number("a number"),
  v.integer("a whole number"),
  v.minValue(100, "an HTTP status, 100 to 599"),
  v.maxValue(599, "an HTTP status, 100 to 599"),
);

/** A host pattern a tenant may own: `example.com` or `*.example.com`. */
export const HostPattern = v.pipe(
  v.string(),
  v.toLowerCase(),
  v.regex(
    /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    "a host name (example.com) or a wildcard (*.example.com), no port or path",
  ),
);

/** A route, in Spin's syntax: `/...`, `/api/...`, `/exact`. */
export const Route = v.pipe(
  v.string(),
  v.startsWith("/", "a route starts with '/'"),
  v.check((s) => !s.includes("...") || s.indexOf("...") === s.length - 3, "'...' may only end a route"),
);

/** Why `value` does not pass `schema`, or null if it does. */
export function problem<T extends v.GenericSchema>(schema: T, value: unknown): string | null {
  const r = v.safeParse(schema, value);
  return r.success ? null : (r.issues[0]?.message ?? "not valid");
}

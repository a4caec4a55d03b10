// The billing app's field rules, as its server checks them (the server
// checks again: these save a round trip and say why at once).
import * as v from "valibot";

export const ContactName = v.pipe(v.string(), v.trim(), v.maxLength(200, "at most 200 characters"));
export const ClientName = v.pipe(
  v.string(),
  v.trim(),
  v.nonEmpty("a name is needed"),
  v.maxLength(200, "at most 200 characters"),
);
export const Phone = v.pipe(
  v.string(),
  v.trim(),
  v.regex(/^[0-9 +()-]{5,32}$/, "5 to 32 digits, spaces, +, ( ) or -"),
);
export const Email = v.pipe(v.string(), v.trim(), v.maxLength(254, "at most 254 characters"), v.email("an e-mail address such as name@example.com"));
export const Note = v.pipe(v.string(), v.maxLength(2000, "at most 2000 characters"));
export const DateDay = v.pipe(
  v.string(),
  v.isoDate("a date as YYYY-MM-DD"),
  v.check((s) => new Date(`${s}T00:00:00Z`).toISOString().startsWith(s), "no such day"),
);

/** The schema of each field a dealer edits in place. */
export const EDITABLE = {
  contact_name: ContactName,
  phone: Phone,
  email: Email,
  note: Note,
} as const;

export type EditableText = keyof typeof EDITABLE;

// The billing app's API (components/billing), served on the billing
// app's own host beside this workspace: same-origin calls under /api.
import { get, patch, post, request } from "./client";

export type BillingRole = "admin" | "dealer";

export interface Me {
  login: string;
  role: BillingRole;
  dealer: { id: number; name: string } | null;
  csrf_token: string;
}

export interface Client {
  id: number;
  name: string;
  contact_name: string;
  phone: string;
  email: string;
  note: string;
  tariff_id: number;
  tariff: string;
  /** Unix ms. */
  registered_at: number;
  version: number;
  dealer_id?: number;
  dealer?: string;
}

export interface Page<T> {
  total: number;
  page: number;
  per_page: number;
  rows: T[];
}

export interface Payment {
  id: number;
  client_id?: number;
  amount_cents: number;
  currency: string;
  /** Unix ms. */
  paid_at: number;
  reference: string;
  signature: string;
  verified: boolean;
}

export interface Tariff {
  id: number;
  name: string;
  monthly_cents: number;
  active: boolean;
}

/** A login of the billing app (admins see them all). */
export interface BillingUser {
  id: number;
  login: string;
  role: BillingRole;
  dealer_id: number | null;
  dealer: string | null;
  /** Unix ms. */
  created_at: number;
  disabled: boolean;
}

export interface Dealer {
  id: number;
  name: string;
  created_at?: number;
}

/** What a dealer may change in place. */
export type ClientChange = Partial<Pick<Client, "contact_name" | "phone" | "email" | "note" | "tariff_id">>;

export interface NewClient {
  name: string;
  contact_name: string;
  phone: string;
  email: string;
  note: string;
  tariff_id: number;
  dealer_id?: number;
}

/** The query of the clients table (what the URL keeps). */
export interface ClientQuery {
  page: number;
  per_page: number;
  sort: string;
  q: string;
  tariff: string;
  registered_from: string;
  registered_to: string;
  dealer?: string;
}

export function clientQueryString(q: ClientQuery): string {
  const entries = Object.entries(q).filter(([, v]) => v !== "" && v !== undefined && v !== null);
  return new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString();
}

export const billing = {
  me: () => get<Me>("/api/me"),
  login: (login: string, password: string) => post<Me>("/api/login", { login, password }),
  logout: () => post<null>("/api/logout"),
  clients: (q: ClientQuery, signal?: AbortSignal) => get<Page<Client>>(`/api/clients?${clientQueryString(q)}`, signal),
  client: (id: number) => get<Client>(`/api/clients/${id}`),
  updateClient: (id: number, version: number, change: ClientChange) =>
    patch<Client>(`/api/clients/${id}`, { version, ...change }),
  createClient: (c: NewClient) => post<Client>("/api/clients", c),
  reassign: (id: number, dealer_id: number) => post<Client>(`/api/clients/${id}/reassign`, { dealer_id }),
  payments: (id: number, page: number, per_page = 50) =>
    get<Page<Payment>>(`/api/clients/${id}/payments?page=${page}&per_page=${per_page}`),
  allPayments: (params: Record<string, string>) =>
    get<Page<Payment>>(`/api/payments?${new URLSearchParams(Object.entries(params).filter(([, v]) => v))}`),
  csvUrl: (q: ClientQuery) => `/api/clients.csv?${clientQueryString({ ...q, page: 1, per_page: 50 })}`,
  tariffs: () => get<{ rows: Tariff[] }>("/api/tariffs").then((r) => r.rows),
  createTariff: (t: Omit<Tariff, "id">) => post<Tariff>("/api/tariffs", t),
  updateTariff: (id: number, t: Partial<Omit<Tariff, "id">>) => patch<Tariff>(`/api/tariffs/${id}`, t),
  dealers: () => get<{ rows: Dealer[] }>("/api/dealers").then((r) => r.rows),
  createDealer: (name: string) => post<Dealer>("/api/dealers", { name }),
  renameDealer: (id: number, name: string) => patch<Dealer>(`/api/dealers/${id}`, { name }),
  createUser: (login: string, password: string, role: BillingRole, dealer_id: number | null) =>
    request<unknown>("POST", "/api/users", { login, password, role, dealer_id }),
  users: () => get<{ rows: BillingUser[] }>("/api/users").then((r) => r.rows),
  /** Disabling a login or setting its password ends its sessions. */
  updateUser: (id: number, change: { disabled?: boolean; password?: string }) =>
    patch<BillingUser>(`/api/users/${id}`, change),
};

// The control-plane API (host/edge-control/openapi.json) as typed calls.
import { del, get, patch, post, put, request, upload } from "./client";
import type { Span } from "../preview";

export type Role = "operator" | "tenant";

export interface WhoAmI {
  id: string;
  login?: string;
  role: Role;
  tenant: string | null;
  csrf_token?: string;
  expires_at?: number;
}

export interface LoggedIn {
  csrf_token: string;
  expires_at: number;
  role: Role;
  tenant: string | null;
}

export interface Shares {
  max_instances?: number;
  max_sessions?: number;
  max_inflight?: number;
  session_rate?: number;
  memory_bytes?: number;
  max_total_memory_bytes?: number;
  request_deadline_ms?: number;
  max_outbound_requests?: number;
  kv_store_bytes?: number;
  sqlite_database_bytes?: number;
  sqlite_statements?: number;
  max_open_files?: number;
}

export interface Quota {
  max_apps: number;
  max_components: number;
  max_versions: number;
  max_artifact_bytes: number;
  max_total_artifact_bytes: number;
  shares?: Shares;
}

export interface Tenant {
  name: string;
  hosts: string[];
  quota: Quota;
  programs?: string[];
  created_at: number;
}

export interface Weighted {
  version: number;
  percent: number;
}

export interface Deployment {
  seq: number;
  versions: Weighted[];
  created_at: number;
}

export interface App {
  name: string;
  created_at: number;
  deployment: Deployment | null;
}

export interface ComponentSpec {
  digest: string;
  key_value_stores?: string[];
  sqlite_databases?: string[];
  allowed_outbound_hosts?: string[];
  variables?: Record<string, string>;
}

export interface VersionSpec {
  components: Record<string, ComponentSpec>;
  routes: { route: string; component: string }[];
  variables?: Record<string, { default?: string; required?: boolean; secret?: boolean }>;
}

export interface Version {
  number: number;
  spec: VersionSpec;
  created_at: number;
}

export interface Artifact {
  digest: string;
  size: number;
  imports: string[];
  created_at?: number;
}

export interface CreatedVersion {
  number: number;
  notes: string[];
}

export interface Smoke {
  path: string;
  status: number;
}

export interface AuditEntry {
  at: number;
  principal: string | null;
  tenant: string | null;
  action: string;
  target: string;
  outcome: "ok" | "refused";
  detail: string;
  remote: string;
}

export interface TokenView {
  id: string;
  name: string;
  role: Role;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

export interface UserView {
  id: string;
  login: string;
  role: Role;
  created_at: number;
  revoked_at: number | null;
}

export interface RuleSpec {
  pattern: string;
  replacement: string;
  /** g (every match), i (ignore case), o (first match only). */
  flags: string;
  content_types?: string[];
}

export interface SiteSettings {
  origin: string;
  origin_timeout_ms?: number;
  content_types?: string[];
}

export interface Site {
  name: string;
  hosts: string[];
  settings: SiteSettings;
  created_at: number;
  rules_version: number | null;
}

export interface RuleSetVersion {
  number: number;
  rules: RuleSpec[];
  created_at: number;
}

export interface SiteDeployment {
  seq: number;
  version: number;
  created_at: number;
}

export interface Preview {
  output: string;
  replacements: number;
  rules: { index: number; matches: number }[];
  spans: Span[];
  spans_note?: string;
  imported?: RuleSpec[];
}

const enc = encodeURIComponent;
const tenantPath = (t: string) => `/v1/tenants/${enc(t)}`;
const appPath = (t: string, a: string) => `${tenantPath(t)}/apps/${enc(a)}`;
const sitePath = (t: string, s: string) => `${tenantPath(t)}/sites/${enc(s)}`;

export const api = {
  whoami: () => get<WhoAmI>("/v1/whoami"),
  login: (login: string, password: string) => post<LoggedIn>("/v1/login", { login, password }),
  logout: () => post<null>("/v1/logout"),

  tenants: () => get<Tenant[]>("/v1/tenants"),
  tenant: (t: string) => get<Tenant>(tenantPath(t)),
  createTenant: (name: string, hosts: string[], quota?: Partial<Quota>) =>
    post<Tenant>("/v1/tenants", quota ? { name, hosts, quota } : { name, hosts }),
  /** Replaces the quota (every field: one left out takes its default). */
  updateQuota: (t: string, quota: Quota) => patch<Tenant>(tenantPath(t), { quota }),
  deleteTenant: (t: string) => del<null>(tenantPath(t)),

  tokens: (t: string | null) => get<TokenView[]>(t ? `${tenantPath(t)}/tokens` : "/v1/tokens"),
  createToken: (t: string | null, name: string, expires_in_s?: number) =>
    post<TokenView & { token: string }>(t ? `${tenantPath(t)}/tokens` : "/v1/tokens", {
      name,
      ...(expires_in_s ? { expires_in_s } : {}),
    }),
  revokeToken: (t: string | null, id: string) =>
    del<null>(t ? `${tenantPath(t)}/tokens/${enc(id)}` : `/v1/tokens/${enc(id)}`),

  users: (t: string | null) => get<UserView[]>(t ? `${tenantPath(t)}/users` : "/v1/users"),
  createUser: (t: string | null, login: string, password: string) =>
    post<UserView>(t ? `${tenantPath(t)}/users` : "/v1/users", { login, password }),
  removeUser: (t: string, id: string) => del<null>(`${tenantPath(t)}/users/${enc(id)}`),

  apps: (t: string) => get<App[]>(`${tenantPath(t)}/apps`),
  app: (t: string, a: string) => get<App>(appPath(t, a)),
  createApp: (t: string, name: string) => post<App>(`${tenantPath(t)}/apps`, { name }),
  versions: (t: string, a: string) => get<Version[]>(`${appPath(t, a)}/versions`),
  deployments: (t: string, a: string) => get<Deployment[]>(`${appPath(t, a)}/deployments`),
  uploadArtifact: (t: string, file: Blob, onProgress: (f: number) => void) =>
    upload<Artifact>(`${tenantPath(t)}/artifacts`, file, "application/wasm", onProgress),
  createVersion: (t: string, a: string, spec: VersionSpec) =>
    post<CreatedVersion>(`${appPath(t, a)}/versions`, spec),
  uploadSpinApp: (t: string, a: string, archive: Blob, onProgress: (f: number) => void) =>
    upload<CreatedVersion>(`${appPath(t, a)}/versions`, archive, "application/gzip", onProgress),
  deploy: (t: string, a: string, versions: Weighted[], smoke?: Smoke) =>
    post<Deployment>(`${appPath(t, a)}/deployments`, smoke ? { versions, smoke } : { versions }),
  rollback: (t: string, a: string, version?: number) =>
    post<Deployment>(`${appPath(t, a)}/rollback`, version === undefined ? {} : { version }),

  sites: (t: string) => get<Site[]>(`${tenantPath(t)}/sites`),
  site: (t: string, s: string) => get<Site>(sitePath(t, s)),
  createSite: (t: string, name: string, hosts: string[], origin: string) =>
    post<Site>(`${tenantPath(t)}/sites`, { name, hosts, origin }),
  ruleSets: (t: string, s: string) => get<RuleSetVersion[]>(`${sitePath(t, s)}/rules`),
  createRules: (t: string, s: string, rules: RuleSpec[]) =>
    post<{ number: number; rules: RuleSpec[] }>(`${sitePath(t, s)}/rules`, { rules }),
  preview: (
    t: string,
    s: string,
    what: { rules: RuleSpec[] } | { nginx: string } | { version: number },
    body: string,
    signal?: AbortSignal,
  ) => request<Preview>("POST", `${sitePath(t, s)}/preview`, { ...what, body }, { signal }),
  /** A page of the site's origin as the rewriter would fetch it, unrewritten. */
  originPage: (t: string, s: string, path: string) =>
    post<{ status: number; content_type: string | null; body: string; truncated: boolean }>(`${sitePath(t, s)}/origin`, {
      path,
    }),
  siteDeployments: (t: string, s: string) => get<SiteDeployment[]>(`${sitePath(t, s)}/deployments`),
  deploySite: (t: string, s: string, version: number, smoke?: Smoke) =>
    post<SiteDeployment>(`${sitePath(t, s)}/deployments`, smoke ? { version, smoke } : { version }),
  rollbackSite: (t: string, s: string) => post<SiteDeployment>(`${sitePath(t, s)}/rollback`),

  audit: (t: string | null, query: URLSearchParams) =>
    get<AuditEntry[]>(`${t ? `${tenantPath(t)}/audit` : "/v1/audit"}?${query}`),

  setVariable: (t: string, a: string, name: string, value: string, secret: boolean) =>
    put<unknown>(`${appPath(t, a)}/variables/${enc(name)}`, { value, secret }),
};

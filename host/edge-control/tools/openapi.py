# Writes ../openapi.json (run: python3 tools/openapi.py from host/edge-control).
# The API's document is generated from this description; a unit test
# holds it to the router.
import json
def ref(n): return {"$ref": f"#/components/schemas/{n}"}
def err(*codes):
    d = {"400": "Malformed request (the error names the field).", "401": "No, unknown, expired or revoked token.", "403": "The caller's role may not do this.", "404": "No such object, or not one the caller may know of.", "409": "The name exists, or there is nothing to roll back to.", "413": "Over a size quota.", "422": "Well-formed, but refused (not a component, import not granted, compile failed, smoke check failed...)."}
    return {c: {"description": d[c], "content": {"application/json": {"schema": ref("Error")}}} for c in codes}
def ok(code, schema, desc):
    r = {"description": desc}
    if schema is not None:
        r["content"] = {"application/json": {"schema": schema}}
    return {code: r}
def body(schema, ct="application/json"):
    return {"required": True, "content": {ct: {"schema": schema}}}
T = {"name": "tenant", "in": "path", "required": True, "schema": {"type": "string"}, "description": "Tenant name. A tenant's token reaches only its own; any other answers 404."}
A = {"name": "app", "in": "path", "required": True, "schema": {"type": "string"}}
VN = {"name": "name", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,62}$"}}
SI = {"name": "site", "in": "path", "required": True, "schema": {"type": "string"}}
N = {"name": "number", "in": "path", "required": True, "schema": {"type": "integer"}}
K = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}, "description": "Token id (k...)."}
L = {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "default": 100, "minimum": 1, "maximum": 1000}}
AF = [
    {"name": "action", "in": "query", "required": False, "schema": {"type": "string"}, "description": "only this action (app.deploy, login, ...)"},
    {"name": "outcome", "in": "query", "required": False, "schema": {"enum": ["ok", "refused"]}},
    {"name": "since", "in": "query", "required": False, "schema": {"type": "integer"}, "description": "only at or after this time (ms since the epoch)"},
    {"name": "before", "in": "query", "required": False, "schema": {"type": "integer"}, "description": "only before this time"},
]
s = lambda **p: {"type": "object", "additionalProperties": False, "properties": p}
I = {"type": "integer"}; S = {"type": "string"}
def op(summary, params=(), req=None, resp=None, errs=("401",)):
    o = {"summary": summary, "responses": {}}
    if params: o["parameters"] = list(params)
    if req: o["requestBody"] = req
    o["responses"].update(resp or {})
    o["responses"].update(err(*errs))
    return o
paths = {
 "/v1/openapi.json": {"get": {"summary": "This document.", "security": [], "responses": {"200": {"description": "OpenAPI 3.1."}}}},
 "/v1/whoami": {"get": op("The caller: principal id, login (a user's login, a token's name), role, tenant; over a session cookie also the session's CSRF token and expiry, so the console can carry on after a page reload.", resp=ok("200", ref("WhoAmI"), "The caller."))},
 "/v1/login": {"post": {"summary": "Log in with a user's login and password (the web console): a session cookie (edge_session; HttpOnly, Secure, SameSite=Strict, 12 h) and the CSRF token every change must send as x-csrf-token. Five failed logins a minute per login (twenty per address) answer 429 with Retry-After.", "security": [], "requestBody": body(ref("Login")), "responses": {**ok("200", ref("LoggedIn"), "Logged in; Set-Cookie carries the session."), **err("400", "401"), "429": {"description": "Too many failed logins; Retry-After says when to try again.", "content": {"application/json": {"schema": ref("Error")}}}}}},
 "/v1/logout": {"post": op("End the caller's session (and clear its cookie).", resp={"204": {"description": "Logged out."}}, errs=("400", "401", "403"))},
 "/v1/users": {
   "get": op("Operators' users (operators).", resp=ok("200", {"type": "array", "items": ref("User")}, "By login."), errs=("401", "403")),
   "post": op("Create an operator's user (operators).", req=body(ref("NewUser")), resp=ok("201", ref("User"), "Created."), errs=("400", "401", "403", "409"))},
 "/v1/tenants/{tenant}/users": {
   "get": op("The tenant's users (never their password hashes).", [T], resp=ok("200", {"type": "array", "items": ref("User")}, "By login."), errs=("401", "404")),
   "post": op("Create a user of the tenant (password: at least 12 characters, stored as an argon2id hash).", [T], req=body(ref("NewUser")), resp=ok("201", ref("User"), "Created."), errs=("400", "401", "404", "409"))},
 "/v1/tenants/{tenant}/users/{id}": {"delete": op("Remove a user of the tenant and end its sessions.", [T, {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}, "description": "User id (u...)."}], resp={"204": {"description": "Removed."}}, errs=("401", "404"))},
 "/v1/tenants": {
   "get": op("Tenants: all for an operator, its own for a tenant.", resp=ok("200", {"type": "array", "items": ref("Tenant")}, "Tenants by name.")),
   "post": op("Create a tenant with its hosts (operators).", req=body(ref("NewTenant")), resp=ok("201", ref("Tenant"), "Created."), errs=("400", "401", "403", "409"))},
 "/v1/tenants/{tenant}": {
   "get": op("One tenant.", [T], resp=ok("200", ref("Tenant"), "The tenant."), errs=("401", "404")),
   "patch": op("Replace a tenant's quota, shares of the node included (operators); they apply at once.", [T], req=body({"type": "object", "additionalProperties": False, "required": ["quota"], "properties": {"quota": ref("Quota")}}), resp=ok("200", ref("Tenant"), "Updated."), errs=("400", "401", "403", "404", "422")),
   "delete": op("Delete a tenant and everything it owns (operators).", [T], resp={"204": {"description": "Deleted; its hosts stop serving."}}, errs=("401", "403", "404"))},
 "/v1/tokens": {
   "get": op("Operators' tokens (operators).", resp=ok("200", {"type": "array", "items": ref("Token")}, "Newest first."), errs=("401", "403")),
   "post": op("Create an operator's token (operators).", req=body(ref("NewToken")), resp=ok("201", ref("CreatedToken"), "The token, shown this once."), errs=("400", "401", "403"))},
 "/v1/tokens/{id}": {"delete": op("Revoke an operator's token (operators).", [K], resp={"204": {"description": "Revoked."}}, errs=("401", "403", "404"))},
 "/v1/tenants/{tenant}/tokens": {
   "get": op("The tenant's tokens (never their secrets).", [T], resp=ok("200", {"type": "array", "items": ref("Token")}, "Newest first."), errs=("401", "404")),
   "post": op("Create a token of the tenant.", [T], req=body(ref("NewToken")), resp=ok("201", ref("CreatedToken"), "The token, shown this once."), errs=("400", "401", "404"))},
 "/v1/tenants/{tenant}/tokens/{id}": {"delete": op("Revoke a token of the tenant.", [T, K], resp={"204": {"description": "Revoked."}}, errs=("401", "404"))},
 "/v1/tenants/{tenant}/artifacts": {
   "get": op("The tenant's uploaded components.", [T], resp=ok("200", {"type": "array", "items": ref("Artifact")}, "Newest first."), errs=("401", "404")),
   "post": op("Upload a component (the .wasm bytes). Checked (a component exporting wasi:http/incoming-handler@0.2.x, size within quota) and compiled in a bounded worker before it is stored by digest; the same bytes again change nothing.", [T], req=body({"type": "string", "format": "binary"}, "application/wasm"), resp=ok("201", ref("Artifact"), "Stored."), errs=("401", "404", "413", "422"))},
 "/v1/tenants/{tenant}/apps": {
   "get": op("The tenant's apps with what each serves.", [T], resp=ok("200", {"type": "array", "items": ref("App")}, "By name."), errs=("401", "404")),
   "post": op("Create an app.", [T], req=body(ref("NewApp")), resp=ok("201", ref("App"), "Created."), errs=("400", "401", "404", "409", "422"))},
 "/v1/tenants/{tenant}/apps/{app}": {"get": op("One app and its current deployment.", [T, A], resp=ok("200", ref("App"), "The app."), errs=("401", "404"))},
 "/v1/tenants/{tenant}/apps/{app}/versions": {
   "get": op("The app's versions, newest first.", [T, A], resp=ok("200", {"type": "array", "items": ref("Version")}, "Versions."), errs=("401", "404")),
   "post": op("Create a version (immutable): as JSON, components by uploaded digest with their grants, routes and variables; or a Spin app as one archive (tar or tar.gz: spin.toml at the root and the files it names), its components checked, compiled and stored with it, all or nothing. Imports edge does not provide, or programs the tenant may not run, are refused; Spin's interfaces its grants do not cover are noted.", [T, A], req={"required": True, "content": {"application/json": {"schema": ref("VersionSpec")}, "application/gzip": {"schema": {"type": "string", "format": "binary"}}, "application/x-tar": {"schema": {"type": "string", "format": "binary"}}}}, resp=ok("201", {"type": "object", "properties": {"number": {"type": "integer"}, "notes": {"type": "array", "items": {"type": "string"}, "description": "Imports its grants do not cover: linked, as on Spin, and refused at each call."}}}, "Its number, and notes on its imports."), errs=("400", "401", "404", "422"))},
 "/v1/tenants/{tenant}/apps/{app}/versions/{number}": {"get": op("One version.", [T, A, N], resp=ok("200", ref("Version"), "The version."), errs=("401", "404"))},
 "/v1/tenants/{tenant}/variables": {"get": op("The tenant's variables, for all its apps (secrets without their value).", [T], resp=ok("200", {"type": "array", "items": ref("Variable")}, "By name."), errs=("401", "404"))},
 "/v1/tenants/{tenant}/variables/{name}": {
   "put": op("Set a variable for every app of the tenant (an app's own value wins); the serving versions read it at once. A secret's value is never shown again. A value a serving version cannot render with (an allowed_outbound_hosts template that would not make a rule) is refused (422).", [T, VN], req=body(ref("SetVariable")), resp={"204": {"description": "Set."}}, errs=("400", "401", "404", "413", "422")),
   "delete": op("Remove a tenant variable, unless a serving version needs it.", [T, VN], resp={"204": {"description": "Removed."}}, errs=("401", "404", "409"))},
 "/v1/tenants/{tenant}/apps/{app}/variables": {"get": op("The app's variables (secrets without their value).", [T, A], resp=ok("200", {"type": "array", "items": ref("Variable")}, "By name."), errs=("401", "404"))},
 "/v1/tenants/{tenant}/apps/{app}/variables/{name}": {
   "put": op("Set an app variable (the versions' templates {{ name }} read it, in variables and allowed_outbound_hosts; the serving versions at once). A secret's value is never shown again. A value a serving version cannot render with is refused (422).", [T, A, VN], req=body(ref("SetVariable")), resp={"204": {"description": "Set."}}, errs=("400", "401", "404", "413", "422")),
   "delete": op("Remove an app variable, unless a serving version needs it.", [T, A, VN], resp={"204": {"description": "Removed."}}, errs=("401", "404", "409"))},
 "/v1/tenants/{tenant}/apps/{app}/deployments": {
   "get": op("The app's deployments, newest (serving) first.", [T, A], resp=ok("200", {"type": "array", "items": ref("Deployment")}, "Deployments."), errs=("401", "404")),
   "post": op("Serve one version, or two splitting the traffic by percent. With `smoke`, the new app must answer the smoke request first; otherwise nothing changes. Activation is atomic: in-flight requests finish on the old version.", [T, A], req=body(ref("NewDeployment")), resp=ok("201", ref("Deployment"), "Serving."), errs=("400", "401", "404", "422"))},
 "/v1/tenants/{tenant}/apps/{app}/rollback": {"post": op("Serve an earlier version again: the named one, or what served before the current deployment.", [T, A], req={"required": False, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": False, "properties": {"version": {"type": "integer"}}}}}}, resp=ok("201", ref("Deployment"), "Serving."), errs=("400", "401", "404", "409", "422"))},
 "/v1/tenants/{tenant}/sites": {
   "get": op("The tenant's sites.", [T], resp=ok("200", {"type": "array", "items": ref("Site")}, "By name."), errs=("401", "404")),
   "post": op("Create a site: hosts (exact names among the tenant's) proxied to an origin through the node's rewriter; it serves at once, with no rules until a rule set is deployed.", [T], req=body(ref("NewSite")), resp=ok("201", ref("Site"), "Created."), errs=("400", "401", "404", "409", "422"))},
 "/v1/tenants/{tenant}/sites/{site}": {"get": op("One site.", [T, SI], resp=ok("200", ref("Site"), "The site."), errs=("401", "404")),
   "patch": op("Replace a site's proxy settings (origin, timeout, content types); they apply to the next request.", [T, SI], req=body(ref("SiteSettings")), resp=ok("200", ref("Site"), "Updated."), errs=("400", "401", "404"))},
 "/v1/tenants/{tenant}/sites/{site}/rules": {
   "get": op("The site's rule sets, newest first.", [T, SI], resp=ok("200", {"type": "array", "items": ref("RuleSet")}, "Rule sets."), errs=("401", "404")),
   "post": op("Create a rule set (immutable) from rules or imported nginx subs_filter/replace_filter lines; every rule is compiled with the rewriter's engine first (the error names the rule, where and why).", [T, SI], req=body(ref("NewRules")), resp=ok("201", ref("RuleSet"), "Its number and rules."), errs=("400", "401", "404", "422"))},
 "/v1/tenants/{tenant}/sites/{site}/rules/{number}": {"get": op("One rule set.", [T, SI, N], resp=ok("200", ref("RuleSet"), "The rule set."), errs=("401", "404"))},
 "/v1/tenants/{tenant}/sites/{site}/preview": {"post": op("Rewrite a body with rules (given, imported, or a stored version) without storing or deploying anything, in one pass of the rewriter's engine: the output, the replacements, each rule's count of them, and where the first 10,000 are (offsets in UTF-16 code units, as JavaScript indexes strings).", [T, SI], req=body(ref("PreviewRequest")), resp=ok("200", ref("Preview"), "The rewritten body."), errs=("400", "401", "404", "422"))},
 "/v1/tenants/{tenant}/sites/{site}/origin": {"post": op("Fetch a page from the site's origin for the preview, unrewritten: a GET of the origin plus `path`, made as the site's rewriter makes its requests (through the outbound policy the node built for it: the origin allowed, the tenant's address policy on the resolved addresses with the node's own listeners refused, the tenant's cap on outbound requests in flight; Host is the origin's, X-Forwarded-Host the site's first host, Accept-Encoding identity, User-Agent edge-console-preview), the whole fetch bounded by the site's origin_timeout_ms. The body is read up to 2 MiB. Nothing is stored.", [T, SI], req=body(ref("OriginRequest")), resp={**ok("200", ref("OriginPage"), "The origin's answer, whatever its status."), **{c: {"description": d, "content": {"application/json": {"schema": ref("Error")}}} for c, d in [("409", "The node does not serve the site (yet): no route, nothing to fetch through."), ("422", "The origin's address is not reachable from this tenant (the node's [outbound] allow_ranges)."), ("502", "Connecting to the origin, or its answer, failed or timed out (the message says what)."), ("503", "The tenant has its max_outbound_requests in flight; try again.")]}}, errs=("400", "401", "404"))},
 "/v1/tenants/{tenant}/sites/{site}/deployments": {
   "get": op("The site's rule deployments, newest (applying) first.", [T, SI], resp=ok("200", {"type": "array", "items": ref("SiteDeployment")}, "Deployments."), errs=("401", "404")),
   "post": op("Apply a rule set to the site; with `smoke`, the site must answer it with the new rules first.", [T, SI], req=body(ref("NewSiteDeployment")), resp=ok("201", ref("SiteDeployment"), "Applying."), errs=("400", "401", "404", "422"))},
 "/v1/tenants/{tenant}/sites/{site}/rollback": {"post": op("Apply an earlier rule set again: the named one, or the one before the current.", [T, SI], req={"required": False, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": False, "properties": {"version": {"type": "integer"}}}}}}, resp=ok("201", ref("SiteDeployment"), "Applying."), errs=("400", "401", "404", "409", "422"))},
 "/v1/tenants/{tenant}/audit": {"get": op("The tenant's audit log, newest first, filtered.", [T, L, *AF], resp=ok("200", {"type": "array", "items": ref("AuditEntry")}, "Entries."), errs=("400", "401", "404"))},
 "/v1/tenants/{tenant}/metrics": {"get": op("The tenant's apps' recent traffic, for plots: the node samples every route every interval_ms (5 s; EDGE_METRICS_SAMPLE_MS in the node's environment) and keeps the last 720 samples (an hour); each app's point sums its components of every version serving in a rollout. Apps that serve or served within those samples, by name; sites are not included. The node's own memory: a restart starts afresh, and each node has its own.", [T, {"name": "app", "in": "query", "required": False, "schema": S, "description": "only this app (an app of the tenant; one without samples has no points)"}, {"name": "since", "in": "query", "required": False, "schema": I, "description": "only points after this time (ms since the epoch): what is new since the last poll"}], resp=ok("200", ref("TenantMetrics"), "Per app, a point per sample, oldest first."), errs=("400", "401", "404"))},
 "/v1/health": {"get": op("The node (operators): status, uptime, instances in use, what it serves, its request rate over the last minute.", resp=ok("200", ref("NodeHealth"), "The node."), errs=("401", "403"))},
 "/v1/audit": {"get": op("The whole audit log (operators), newest first, filtered.", [L, *AF, {"name": "tenant", "in": "query", "required": False, "schema": {"type": "string"}, "description": "only this tenant's lines"}], resp=ok("200", {"type": "array", "items": ref("AuditEntry")}, "Entries."), errs=("401", "403"))},
}
schemas = {
 "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["field", "message"], "properties": {"field": {"type": ["string", "null"], "description": "The request field it is about, as a path (components.web.digest, versions[1].percent), or null."}, "message": {"type": "string", "description": "What is wrong and what is allowed."}}}}},
 "WhoAmI": {**s(id=S, login={"type": "string", "description": "A user's login, or a token's name."}, role={"enum": ["operator", "tenant"]}, tenant={"type": ["string", "null"]}, csrf_token={"type": "string", "description": "Only over a session cookie: the session's CSRF token (as the login answered), for x-csrf-token."}, expires_at={"type": "integer", "description": "Only over a session cookie: when the session ends (ms since the epoch)."}), "required": ["id", "login", "role", "tenant"]},
 "Quota": s(max_apps=I, max_components=I, max_versions=I, max_artifact_bytes=I, max_total_artifact_bytes=I, shares=ref("Shares")),
 "Shares": {**s(max_instances=I, max_sessions=I, max_inflight=I, session_rate=I, memory_bytes=I, max_total_memory_bytes=I, request_deadline_ms=I, max_outbound_requests=I, kv_store_bytes=I, sqlite_database_bytes=I, sqlite_statements=I, max_open_files=I), "description": "The tenant's share of the node; each unset one is the node's [limits] default."},
 "Tenant": s(name=S, hosts={"type": "array", "items": S}, quota=ref("Quota"), programs={"type": "array", "items": S}, created_at=I),
 "NewTenant": {**s(name={"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,62}$"}, hosts={"type": "array", "items": S, "minItems": 1, "description": "example.com or *.example.com; not held by another tenant."}, quota=ref("Quota"), programs={"type": "array", "items": S, "description": "programs its components may run through the sidecar, within the node's [sidecar] allow"}), "required": ["name", "hosts"]},
 "Token": s(id=S, name=S, role=S, created_at=I, expires_at={"type": ["integer", "null"]}, revoked_at={"type": ["integer", "null"]}),
 "CreatedToken": s(id=S, name=S, role=S, created_at=I, expires_at={"type": ["integer", "null"]}, revoked_at={"type": "null"}, token={"type": "string", "description": "edge_ID_SECRET; send as `Authorization: Bearer TOKEN`. Shown once."}),
 "NewToken": {**s(name=S, expires_in_s={"type": "integer", "minimum": 1, "maximum": 315360000}), "required": ["name"]},
 "Artifact": s(digest={"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}, size=I, imports={"type": "array", "items": S}, created_at=I),
 "NewApp": {**s(name={"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,62}$"}), "required": ["name"]},
 "App": s(name=S, created_at=I, deployment={"oneOf": [ref("Deployment"), {"type": "null"}]}),
 "ComponentSpec": {**s(digest=S, key_value_stores={"type": "array", "items": S}, allowed_outbound_hosts={"type": "array", "items": S, "description": "Spin syntax: https://api.example.com, http://*:8080...; or templates of the app's variables, rendered when served: https://{{ api_host }}"}, variables={"type": "object", "additionalProperties": S, "description": "values or templates: {{ app_variable }}"}, files={"type": "array", "maxItems": 10000, "items": ref("FileSpec"), "description": "Spin's files, mounted read-only at their paths; each a file this tenant uploaded (in a Spin app's archive)"}), "required": ["digest"]},
 "FileSpec": {**s(path={"type": "string", "description": "absolute path in the guest: /ui/index.html"}, digest={"type": "string", "description": "sha256:HEX of its content"}, size={"type": "integer", "minimum": 0}), "required": ["path", "digest", "size"]},
 "RouteSpec": {**s(route={"type": "string", "description": "Spin route syntax: /exact, /prefix/..., /:name"}, component=S), "required": ["route", "component"]},
 "VariableDecl": s(default=S, required={"type": "boolean"}, secret={"type": "boolean"}),
 "VersionSpec": {**s(components={"type": "object", "additionalProperties": ref("ComponentSpec")}, routes={"type": "array", "items": ref("RouteSpec"), "minItems": 1}, variables={"type": "object", "additionalProperties": ref("VariableDecl"), "description": "App variables the components' templates use (Spin's [variables])"}), "required": ["components", "routes"]},
 "Variable": s(name=S, secret={"type": "boolean"}, value=S, updated_at=I),
 "SetVariable": {**s(value={"type": "string", "maxLength": 65536}, secret={"type": "boolean", "default": False}), "required": ["value"]},
 "Version": s(number=I, spec=ref("VersionSpec"), created_at=I),
 "Weighted": {**s(version=I, percent={"type": "integer", "minimum": 0, "maximum": 100}), "required": ["version", "percent"]},
 "Deployment": s(seq=I, versions={"type": "array", "items": ref("Weighted")}, created_at=I),
 "Smoke": {**s(path={"type": "string", "description": "Requested on the tenant's first host."}, status={"type": "integer", "default": 200}), "required": ["path"]},
 "NewDeployment": {**s(versions={"type": "array", "items": ref("Weighted"), "minItems": 1, "maxItems": 2, "description": "Percents add up to 100."}, smoke=ref("Smoke"), variables={"type": "object", "additionalProperties": ref("SetVariable"), "description": "The app's variables to set with the deployment (by name): in force only if it is, so a refused deployment changes no value the serving one uses (edge deploy --var, --secret)."}), "required": ["versions"]},
 "SiteSettings": s(origin={"type": "string", "description": "http(s)://host[:port], no path"}, origin_timeout_ms={"type": "integer", "default": 15000}, content_types={"type": "array", "items": S}),
 "NewSite": {"type": "object", "additionalProperties": False, "required": ["name", "hosts", "origin"], "properties": {"name": S, "hosts": {"type": "array", "items": S, "minItems": 1}, "origin": S, "origin_timeout_ms": I, "content_types": {"type": "array", "items": S}}},
 "Site": s(name=S, hosts={"type": "array", "items": S}, settings=ref("SiteSettings"), created_at=I, rules_version={"type": ["integer", "null"]}),
 "Rule": {**s(pattern={"type": "string", "description": "a regular expression"}, replacement=S, flags={"type": "string", "default": "g", "description": "g (every match), i (ignore case), o (first match only)"}, content_types={"type": "array", "items": S}), "required": ["pattern", "replacement"]},
 "NewRules": s(rules={"type": "array", "items": ref("Rule")}, nginx={"type": "string", "description": "nginx config text with subs_filter / replace_filter lines"}),
 "RuleSet": s(number=I, rules={"type": "array", "items": ref("Rule")}, created_at=I),
 "PreviewRequest": {**s(rules={"type": "array", "items": ref("Rule")}, nginx=S, version=I, body=S), "required": ["body"]},
 "Preview": s(output=S, replacements=I, rules={"type": "array", "items": s(index=I, matches=I)}, spans={"type": "array", "items": s(rule=I, input={"type": "array", "items": I, "minItems": 2, "maxItems": 2}, output={"type": "array", "items": I, "minItems": 2, "maxItems": 2})}, spans_note=S, imported={"type": "array", "items": ref("Rule")}),
 "OriginRequest": {**s(path={"type": "string", "maxLength": 2048, "pattern": "^/[^\\s\\x00-\\x1f\\x7f#]*$", "description": "path and query, starting with '/'; no control characters, spaces or fragment (percent-encode them)"}), "required": ["path"]},
 "OriginPage": {**s(status={"type": "integer", "description": "the origin's status"}, content_type={"type": ["string", "null"], "description": "its Content-Type, if it sent one"}, body={"type": "string", "description": "the body as it came (Accept-Encoding: identity), UTF-8 with invalid sequences replaced"}, truncated={"type": "boolean", "description": "the body went on past 2 MiB; `body` holds the first 2 MiB"}), "required": ["status", "content_type", "body", "truncated"]},
 "NewSiteDeployment": {**s(version=I, smoke=ref("Smoke")), "required": ["version"]},
 "SiteDeployment": s(seq=I, version=I, created_at=I),
 "Login": {**s(login=S, password=S), "required": ["login", "password"]},
 "LoggedIn": s(csrf_token=S, expires_at=I, role=S, tenant={"type": ["string", "null"]}),
 "User": s(id=S, login=S, role=S, created_at=I, revoked_at={"type": ["integer", "null"]}),
 "NewUser": {**s(login={"type": "string", "maxLength": 255}, password={"type": "string", "minLength": 12, "maxLength": 1024}), "required": ["login", "password"]},
 "Responses": {**s(**{"2xx": I, "3xx": I, "4xx": I, "5xx": I}), "description": "Responses of the interval by status class."},
 "Point": {**s(t={"type": "integer", "description": "end of the interval, ms since the epoch"}, rps={"type": "number", "description": "responses per second over the interval"}, p50_ms={"type": ["number", "null"], "description": "median time to response head, estimated from the latency histogram (linear within a bucket); null without requests"}, p99_ms={"type": ["number", "null"], "description": "99th percentile, likewise"}, errors={"type": "integer", "description": "traps + deadline_kills"}, traps={"type": "integer", "description": "guest traps (memory-cap kills included)"}, deadline_kills={"type": "integer", "description": "requests stopped at their deadline"}, responses=ref("Responses")), "required": ["t", "rps", "p50_ms", "p99_ms", "errors", "traps", "deadline_kills", "responses"]},
 "AppSeries": s(app=S, points={"type": "array", "items": ref("Point")}),
 "TenantMetrics": s(interval_ms=I, apps={"type": "array", "items": ref("AppSeries")}),
 "NodeHealth": s(status={"enum": ["ok", "degraded", "draining"]}, pop={"type": ["string", "null"]}, uptime_s=I, instances=s(in_use={"type": "integer", "description": "component instances alive now"}, total={"type": "integer", "description": "the pools' size ([pool] total_component_instances per engine pool)"}), tenants={"type": "integer", "description": "tenants served (the config files' and the control plane's)"}, apps={"type": "integer", "description": "control-plane apps deployed"}, components=I, components_failed=I, requests_1m={"type": "integer", "description": "responses in the samples of the last minute, every tenant's"}, rps_1m={"type": "number"}, sample_interval_ms=I),
 "AuditEntry": s(at=I, principal={"type": ["string", "null"]}, tenant={"type": ["string", "null"]}, action=S, target=S, outcome={"enum": ["ok", "refused"]}, detail=S, remote=S),
}
doc = {"openapi": "3.1.0", "info": {"title": "edge control API", "version": "1", "description": "Tenants deploy, version and roll back their components. Every object lives under its tenant (/v1/tenants/{tenant}/...); a tenant's token reaches only its own tenant, and another tenant's objects answer 404 as missing ones do. Times are milliseconds since the epoch. Errors are {\"error\": {\"field\", \"message\"}}."},
 "security": [{"bearer": []}, {"session": []}], "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "An API token: edge_ID_SECRET."}, "session": {"type": "apiKey", "in": "cookie", "name": "edge_session", "description": "A session from POST /v1/login; changes also need its CSRF token in x-csrf-token."}}, "schemas": schemas}, "paths": paths}
open(__import__("os").path.join(__import__("os").path.dirname(__file__), "..", "openapi.json"), "w").write(json.dumps(doc, indent=2) + "\n")

// The Worker's `env`: its bindings, as the build recorded them from
// wrangler.toml (or the build's options). Vars are part of the build, as on
// Cloudflare (a change is a new deploy); secrets are read at the first
// request from the component's variables (wasi:config), where the tenant's
// secrets are given, so they are never part of the snapshot or the artifact.

import declared from 'edge:worker-bindings';
import { get as getVariable } from 'wasi:config/store@0.2.0-rc.1';
import { KVNamespace } from './kv.js';
import { Fetcher } from './fetcher.js';

let env;

/** The variable a binding's value is read from: Spin's variable names are
 * lower-case (API_KEY → api_key). */
export function variableName(binding) {
  return binding.toLowerCase();
}

function secret(name) {
  let value;
  try {
    value = getVariable(variableName(name));
  } catch (e) {
    throw new Error(`secret ${name}: ${e && e.payload ? e.payload.val : e}`);
  }
  return value;
}

/** `env`, built at the first request and kept for the instance's life. */
export function bindings() {
  if (env) return env;
  env = {};
  for (const [name, value] of Object.entries(declared.vars || {})) {
    env[name] = value;
  }
  for (const [name, label] of Object.entries(declared.kv || {})) {
    env[name] = new KVNamespace(label);
  }
  for (const [name, app] of Object.entries(declared.services || {})) {
    env[name] = new Fetcher(app);
  }
  for (const name of declared.secrets || []) {
    const value = secret(name);
    if (value !== undefined) env[name] = value;
  }
  return env;
}

// A partial `request.cf`: what a PoP of edge knows about a request. The host
// gives the PoP's name and country to Worker components as environment
// variables (EDGE_COLO, EDGE_COUNTRY); the rest of Cloudflare's fields are
// absent, as they are on workerd outside Cloudflare. And the origins of the
// sites the Worker serves (EDGE_ORIGINS), for passThroughOnException.

import { getEnvironment } from 'wasi:cli/environment@0.2.10';

let base;
let origins;

function pop() {
  if (base === undefined) {
    const vars = new Map(getEnvironment());
    base = {};
    if (vars.has('EDGE_COLO')) base.colo = vars.get('EDGE_COLO');
    if (vars.has('EDGE_COUNTRY')) base.country = vars.get('EDGE_COUNTRY');
    origins = vars.has('EDGE_ORIGINS') ? JSON.parse(vars.get('EDGE_ORIGINS')) : {};
  }
  return base;
}

/** The origin of the site whose host this is, if the Worker serves one
 * (given by the host as EDGE_ORIGINS). */
export function originOf(host) {
  pop();
  return origins[host.toLowerCase()] || null;
}

/** The `cf` object of a request: a fresh copy, as the Worker may change it. */
export function cfOf() {
  return { ...pop() };
}

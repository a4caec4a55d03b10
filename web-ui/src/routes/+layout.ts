// A single-page app: nothing is rendered on a server or at build time.
export const ssr = false;
export const prerender = false;

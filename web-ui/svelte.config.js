import adapter from "@sveltejs/adapter-static";
import { vitePreprocess } from "@sveltejs/vite-plugin-svelte";

/** @type {import('@sveltejs/kit').Config} */
export default {
  preprocess: vitePreprocess(),
  kit: {
    // A single-page app: the host serves build/ and answers every other
    // path with index.html (host/edge/src/console.rs). Precompressed
    // siblings (.br, .gz) are what it sends.
    adapter: adapter({ pages: "build", assets: "build", fallback: "index.html", precompress: true }),
    // The page's script policy travels in a meta tag with the hashes of
    // SvelteKit's inline bootstrap; no other script runs.
    csp: {
      mode: "hash",
      directives: {
        "default-src": ["self"],
        "script-src": ["self"],
        "style-src": ["self"],
        "img-src": ["self", "data:"],
        "connect-src": ["self"],
        "object-src": ["none"],
        "base-uri": ["self"],
        "form-action": ["self"],
      },
    },
  },
};

// The Workers engine's entry: the adapter's incoming handler, and the
// check a deploy runs on a Worker's script (`edge:worker/check`).
export { incomingHandler } from './adapter.js';
import { check as checkScript } from './script.js';
import { markServing } from './prelude.js';

export const check = {
  run() {
    markServing();
    return checkScript();
  },
};

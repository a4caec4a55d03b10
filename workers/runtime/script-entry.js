// `edge:worker-entry` in the engine: the Worker whose script the host gives.
import { load } from './script.js';

export default {
  fetch(request, env, ctx) {
    const worker = load().default;
    if (!worker || typeof worker.fetch !== 'function') {
      throw new TypeError('the Worker has no default export with a fetch handler');
    }
    return worker.fetch(request, env, ctx);
  },
};

// `edge:worker-bindings` in the engine: the table the Worker's script
// carries (read when `env` is first built, at the first request).
import { load } from './script.js';

export default {
  get vars() {
    return load().bindings.vars;
  },
  get secrets() {
    return load().bindings.secrets;
  },
  get kv() {
    return load().bindings.kv;
  },
  get services() {
    return load().bindings.services;
  },
};

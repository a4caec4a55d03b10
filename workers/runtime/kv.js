// KV namespaces: the Workers KV API on edge's key-value stores
// (wasi:keyvalue), one store per binding (`CACHE` → store label `cache`,
// granted by the manifest's `key_value_stores`).
//
// Each value is stored in an envelope that keeps its expiration and
// metadata beside it: "EKV1", a u32 (little-endian) length of a JSON
// header { e: expiration (s since the epoch) | null, m: metadata | null },
// the header, then the value's bytes. A value written without the envelope
// (by a Spin app sharing the store) reads as itself with no metadata.
// Expired keys read as absent and are deleted when met.
//
// Errors carry workerd's words (KV GET/PUT/DELETE failed: STATUS ...) so a
// Worker's error handling sees what it would on Cloudflare; the limits are
// edge's (key 512 bytes as on Cloudflare; values up to the store's value
// limit, 1 MiB less the envelope).

import { open } from 'wasi:keyvalue/store@0.2.0-draft';

const MAGIC = [0x45, 0x4b, 0x56, 0x31]; // "EKV1"
const MAX_KEY_BYTES = 512;
const MAX_VALUE_BYTES = 1024 * 1024 - 2048;
const MAX_METADATA_BYTES = 1024;
const MIN_TTL_SECONDS = 60;
const MAX_LIST_LIMIT = 1000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function failure(op, status, message) {
  return new Error(`KV ${op} failed: ${status} ${message}`);
}

function checkKey(op, key) {
  if (typeof key !== 'string') key = String(key);
  const length = encoder.encode(key).length;
  if (length === 0) throw new TypeError('Key name cannot be empty.');
  if (key === '.' || key === '..') throw new TypeError(`"${key}" is not allowed as a key name.`);
  if (length > MAX_KEY_BYTES) throw failure(op, 414, `UTF-8 encoded length of ${length} exceeds key length limit of ${MAX_KEY_BYTES}.`);
  return key;
}

function wrap(value, expiration, metadata) {
  const header = encoder.encode(JSON.stringify({ e: expiration ?? null, m: metadata ?? null }));
  const out = new Uint8Array(8 + header.length + value.length);
  out.set(MAGIC, 0);
  new DataView(out.buffer).setUint32(4, header.length, true);
  out.set(header, 8);
  out.set(value, 8 + header.length);
  return out;
}

function unwrap(stored) {
  if (stored.length < 8 || MAGIC.some((b, i) => stored[i] !== b)) {
    return { value: stored, expiration: null, metadata: null };
  }
  const length = new DataView(stored.buffer, stored.byteOffset, stored.byteLength).getUint32(4, true);
  const header = JSON.parse(decoder.decode(stored.subarray(8, 8 + length)));
  return { value: stored.subarray(8 + length), expiration: header.e, metadata: header.m };
}

const now = () => Math.floor(Date.now() / 1000);

function storeError(op, e) {
  const payload = e && e.payload;
  if (payload && payload.tag === 'other') return failure(op, 500, payload.val);
  if (payload) return failure(op, 500, payload.tag);
  return e;
}

async function valueBytes(value) {
  if (typeof value === 'string') return encoder.encode(value);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ReadableStream) return new Uint8Array(await new Response(value).arrayBuffer());
  // workerd stores anything else as its string form.
  return encoder.encode(String(value));
}

/** The read's type; workerd reads an unknown one as text. */
function typeOf(options) {
  return typeof options === 'string' ? options : options && options.type ? options.type : 'text';
}

function convert(bytes, type) {
  switch (type) {
    case 'json':
      return JSON.parse(decoder.decode(bytes));
    case 'arrayBuffer':
      return bytes.slice().buffer;
    case 'stream':
      return new Response(bytes.slice()).body;
    default:
      return decoder.decode(bytes);
  }
}

export class KVNamespace {
  #label;
  #bucket;

  constructor(label) {
    this.#label = label;
  }

  #open(op) {
    if (!this.#bucket) {
      try {
        this.#bucket = open(this.#label);
      } catch (e) {
        throw storeError(op, e);
      }
    }
    return this.#bucket;
  }

  /** The live entry for `key`, or null; an expired one is deleted. */
  #read(op, key) {
    const bucket = this.#open(op);
    let stored;
    try {
      stored = bucket.get(key);
    } catch (e) {
      throw storeError(op, e);
    }
    if (stored === undefined || stored === null) return null;
    const entry = unwrap(stored);
    if (entry.expiration !== null && entry.expiration <= now()) {
      try {
        bucket.delete(key);
      } catch {
        // Read as absent either way.
      }
      return null;
    }
    return entry;
  }

  async get(key, options) {
    if (Array.isArray(key)) {
      const type = typeOf(options);
      const out = new Map();
      for (const k of key) {
        const entry = this.#read('GET', checkKey('GET', k));
        out.set(k, entry ? convert(entry.value, type) : null);
      }
      return out;
    }
    key = checkKey('GET', key);
    const type = typeOf(options);
    const entry = this.#read('GET', key);
    return entry ? convert(entry.value, type) : null;
  }

  async getWithMetadata(key, options) {
    key = checkKey('GET', key);
    const type = typeOf(options);
    const entry = this.#read('GET', key);
    if (!entry) return { value: null, metadata: null, cacheStatus: null };
    return { value: convert(entry.value, type), metadata: entry.metadata, cacheStatus: null };
  }

  async put(key, value, options = {}) {
    key = checkKey('PUT', key);
    const bytes = await valueBytes(value);
    if (bytes.length > MAX_VALUE_BYTES) {
      throw failure('PUT', 413, `Value length of ${bytes.length} exceeds limit of ${MAX_VALUE_BYTES}.`);
    }
    let expiration = null;
    // As workerd: a value that is not a number counts as 0.
    const seconds = (v) => {
      const n = Math.floor(Number(v));
      return Number.isFinite(n) ? n : 0;
    };
    if (options.expiration !== undefined) {
      const e = seconds(options.expiration);
      if (e <= now()) throw failure('PUT', 400, `Invalid expiration of ${e}. Please specify integer greater than the current number of seconds since the UNIX epoch.`);
      if (e < now() + MIN_TTL_SECONDS) throw failure('PUT', 400, `Invalid expiration of ${e}. Expiration times must be at least ${MIN_TTL_SECONDS} seconds in the future.`);
      expiration = e;
    }
    if (options.expirationTtl !== undefined) {
      const ttl = seconds(options.expirationTtl);
      if (ttl <= 0) throw failure('PUT', 400, `Invalid expiration_ttl of ${ttl}. Please specify integer greater than 0.`);
      if (ttl < MIN_TTL_SECONDS) throw failure('PUT', 400, `Invalid expiration_ttl of ${ttl}. Expiration TTL must be at least ${MIN_TTL_SECONDS}.`);
      expiration = now() + ttl;
    }
    let metadata = null;
    if (options.metadata !== undefined && options.metadata !== null) {
      const json = JSON.stringify(options.metadata);
      const length = encoder.encode(json).length;
      if (length > MAX_METADATA_BYTES) throw failure('PUT', 413, `Metadata length of ${length} exceeds limit of ${MAX_METADATA_BYTES}.`);
      metadata = JSON.parse(json);
    }
    try {
      this.#open('PUT').set(key, wrap(bytes, expiration, metadata));
    } catch (e) {
      throw storeError('PUT', e);
    }
  }

  async delete(key) {
    key = checkKey('DELETE', key);
    try {
      this.#open('DELETE').delete(key);
    } catch (e) {
      throw storeError('DELETE', e);
    }
  }

  /**
   * Keys in UTF-8 order, from `cursor` (the last key of the previous page,
   * opaque to the Worker), at most `limit` of those starting with `prefix`.
   */
  async list(options = {}) {
    const prefix = options.prefix == null ? '' : String(options.prefix);
    // workerd lists its default page for a limit that is not 1..1000.
    let limit = Math.floor(Number(options.limit));
    if (!Number.isFinite(limit) || limit < 1 || limit > MAX_LIST_LIMIT) limit = MAX_LIST_LIMIT;
    let after = null;
    if (options.cursor) {
      try {
        after = decoder.decode(Uint8Array.from(atob(options.cursor), (c) => c.charCodeAt(0)));
      } catch {
        throw failure('GET', 400, 'Invalid cursor.');
      }
    }
    const bucket = this.#open('GET');
    const names = [];
    let cursor;
    do {
      let page;
      try {
        page = bucket.listKeys(cursor);
      } catch (e) {
        throw storeError('GET', e);
      }
      for (const name of page.keys) {
        if (name.startsWith(prefix) && (after === null || byteOrder(name, after) > 0)) names.push(name);
      }
      cursor = page.cursor;
    } while (cursor !== undefined && cursor !== null);
    names.sort(byteOrder);
    const keys = [];
    let complete = true;
    for (const name of names) {
      if (keys.length === limit) {
        complete = false;
        break;
      }
      const entry = this.#read('GET', name);
      if (!entry) continue;
      const key = { name };
      if (entry.expiration !== null) key.expiration = entry.expiration;
      if (entry.metadata !== null) key.metadata = entry.metadata;
      keys.push(key);
    }
    const result = { keys, list_complete: complete, cacheStatus: null };
    if (!complete) {
      const last = encoder.encode(keys[keys.length - 1].name);
      result.cursor = btoa(String.fromCharCode(...last));
    }
    return result;
  }
}

/** Orders keys as Cloudflare lists them: by their UTF-8 bytes. */
function byteOrder(a, b) {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

// HTMLRewriter, streaming: the host's lol_html parses the page
// (edge:html/rewriter); where one of the Worker's handlers must run it
// stops and hands over what the handler may read; the handler's calls
// (setAttribute, before, remove, ...) become the changes made there.
// Nothing buffers the page: each chunk read from the source is parsed and
// its output passed on before the next is read.

import { Rewriter } from 'edge:html/rewriter@0.1.0';

// The host takes chunks of at most this many bytes.
const CHUNK = 65536;

const encoder = new TextEncoder();

function invalid() {
  return new TypeError('This content token is no longer valid. Content tokens are only valid during the execution of the relevant content handler.');
}

/** A unit's handler-time state: its changes, and the content still being read. */
class Token {
  constructor() {
    this.changes = [];
    this.waits = [];
    this.live = true;
  }

  check() {
    if (!this.live) throw invalid();
  }

  /** Queues a change whose content may be a string, Response or stream. */
  insert(tag, content, options) {
    this.check();
    const html = Boolean(options && options.html);
    if (typeof content === 'string') {
      this.changes.push({ tag, val: { value: content, html } });
      return;
    }
    // Streaming content: read it whole before the changes go back.
    const change = { tag, val: { value: '', html } };
    this.changes.push(change);
    const body = content instanceof Response ? content : new Response(content);
    this.waits.push(body.text().then((text) => {
      change.val.value = text;
    }));
  }

  push(tag, val) {
    this.check();
    this.changes.push(val === undefined ? { tag } : { tag, val });
  }
}


/** What every rewritable unit can do around itself; its token is kept
 * where the Worker cannot reach it. */
const tokens = new WeakMap();

class Unit {
  constructor(token, removed) {
    tokens.set(this, { token, removed });
  }

  get removed() {
    return tokens.get(this).removed;
  }

  before(content, options) {
    tokens.get(this).token.insert('before', content, options);
    return this;
  }

  after(content, options) {
    tokens.get(this).token.insert('after', content, options);
    return this;
  }

  replace(content, options) {
    const t = tokens.get(this);
    t.token.insert('replace', content, options);
    t.removed = true;
    return this;
  }

  remove() {
    const t = tokens.get(this);
    t.token.push('remove');
    t.removed = true;
    return this;
  }
}

class Element extends Unit {
  #t;
  #info;
  #attrs;
  #tag;
  #endTags;

  constructor(token, info, endTags) {
    super(token, info.removed);
    this.#t = token;
    this.#info = info;
    this.#attrs = new Map(info.attributes);
    this.#tag = info.tagName;
    this.#endTags = endTags;
  }

  get tagName() {
    return this.#tag;
  }

  set tagName(name) {
    this.#t.push('set-name', String(name));
    this.#tag = String(name).toLowerCase();
  }

  get attributes() {
    return [...this.#attrs.entries()][Symbol.iterator]();
  }

  get namespaceURI() {
    return this.#info.namespaceUri;
  }

  get selfClosing() {
    return this.#info.selfClosing;
  }

  get canHaveContent() {
    return this.#info.canHaveContent;
  }

  getAttribute(name) {
    const v = this.#attrs.get(String(name).toLowerCase());
    return v === undefined ? null : v;
  }

  hasAttribute(name) {
    return this.#attrs.has(String(name).toLowerCase());
  }

  setAttribute(name, value) {
    this.#t.push('set-attribute', [String(name), String(value)]);
    this.#attrs.set(String(name).toLowerCase(), String(value));
    return this;
  }

  removeAttribute(name) {
    this.#t.push('remove-attribute', String(name));
    this.#attrs.delete(String(name).toLowerCase());
    return this;
  }

  prepend(content, options) {
    this.#t.insert('prepend', content, options);
    return this;
  }

  append(content, options) {
    this.#t.insert('append', content, options);
    return this;
  }

  setInnerContent(content, options) {
    this.#t.insert('set-inner-content', content, options);
    return this;
  }

  removeAndKeepContent() {
    this.#t.push('remove-and-keep-content');
    tokens.get(this).removed = true;
    return this;
  }

  onEndTag(handler) {
    if (typeof handler !== 'function') throw new TypeError('onEndTag() expects a function.');
    if (!this.#info.canHaveContent) throw new TypeError('No end tag.');
    this.#t.push('on-end-tag', this.#endTags.add(handler));
  }
}

class EndTag extends Unit {
  #t;
  #name;

  constructor(token, name) {
    super(token, false);
    this.#t = token;
    this.#name = name;
  }

  get name() {
    return this.#name;
  }

  set name(name) {
    this.#t.push('set-name', String(name));
    this.#name = String(name);
  }
}

class Text extends Unit {
  #info;

  constructor(token, info) {
    super(token, info.removed);
    this.#info = info;
  }

  get text() {
    return this.#info.text;
  }

  get lastInTextNode() {
    return this.#info.lastInTextNode;
  }
}

class Comment extends Unit {
  #t;
  #text;

  constructor(token, info) {
    super(token, info.removed);
    this.#t = token;
    this.#text = info.text;
  }

  get text() {
    return this.#text;
  }

  set text(value) {
    this.#t.push('set-text', String(value));
    this.#text = String(value);
  }
}

class Doctype {
  #info;

  constructor(info) {
    this.#info = info;
  }

  get name() {
    return this.#info.name ?? null;
  }

  get publicId() {
    return this.#info.publicId ?? null;
  }

  get systemId() {
    return this.#info.systemId ?? null;
  }
}

class DocumentEnd {
  #t;

  constructor(token) {
    this.#t = token;
  }

  append(content, options) {
    this.#t.insert('append', content, options);
    return this;
  }
}

/** End-tag handlers an element's handler registered, by id. */
class EndTagHandlers {
  #next = 0;
  #handlers = new Map();

  add(handler) {
    const id = this.#next++;
    this.#handlers.set(id, handler);
    return id;
  }

  take(id) {
    const h = this.#handlers.get(id);
    this.#handlers.delete(id);
    return h;
  }
}

export class HTMLRewriter {
  #selectors = [];
  #document = [];

  on(selector, handlers) {
    if (typeof selector !== 'string') throw new TypeError('Selector must be a string.');
    this.#selectors.push({ selector, handlers });
    return this;
  }

  onDocument(handlers) {
    this.#document.push(handlers);
    return this;
  }

  transform(response) {
    if (!(response instanceof Response)) throw new TypeError('transform() expects a Response.');
    const has = (h, name) => Boolean(h && typeof h[name] === 'function');
    const specs = this.#selectors.map(({ selector, handlers }) => ({
      selector,
      element: has(handlers, 'element'),
      comments: has(handlers, 'comments'),
      text: has(handlers, 'text'),
    }));
    const doc = (name) => this.#document.some((h) => has(h, name));
    let rewriter;
    try {
      rewriter = Rewriter.create(specs, { doctype: doc('doctype'), comments: doc('comments'), text: doc('text'), end: doc('end') });
    } catch (e) {
      throw new TypeError(`Parser error: ${e && e.payload !== undefined ? e.payload : e}`);
    }
    const selectors = this.#selectors;
    const documents = this.#document;
    const endTags = new EndTagHandlers();
    const reader = response.body ? response.body.getReader() : null;
    let done = false;

    const finish = () => {
      if (!done) {
        done = true;
        rewriter[Symbol.dispose]();
      }
    };

    /** Runs the handlers a stop calls for and gives back their changes. */
    const stop = async (event) => {
      const token = new Token();
      const run = async (owner, name, unit) => {
        const result = owner[name](unit);
        if (result && typeof result.then === 'function') await result;
      };
      const v = event.val;
      switch (event.tag) {
        case 'element':
          await run(selectors[v.handler].handlers, 'element', new Element(token, v, endTags));
          break;
        case 'end-tag': {
          const handler = endTags.take(v.id);
          if (handler) {
            const result = handler(new EndTag(token, v.name));
            if (result && typeof result.then === 'function') await result;
          }
          break;
        }
        case 'text': {
          const unit = new Text(token, v);
          if (v.handler === undefined || v.handler === null) {
            for (const h of documents) if (has(h, 'text')) await run(h, 'text', unit);
          } else {
            await run(selectors[v.handler].handlers, 'text', unit);
          }
          break;
        }
        case 'comment': {
          const unit = new Comment(token, v);
          if (v.handler === undefined || v.handler === null) {
            for (const h of documents) if (has(h, 'comments')) await run(h, 'comments', unit);
          } else {
            await run(selectors[v.handler].handlers, 'comments', unit);
          }
          break;
        }
        case 'doctype': {
          const unit = new Doctype(v);
          for (const h of documents) if (has(h, 'doctype')) await run(h, 'doctype', unit);
          break;
        }
        case 'document-end': {
          const unit = new DocumentEnd(token);
          for (const h of documents) if (has(h, 'end')) await run(h, 'end', unit);
          break;
        }
        default:
          break;
      }
      await Promise.all(token.waits);
      token.live = false;
      rewriter.respond(token.changes);
    };

    /** Takes events until the rewriter wants input (false) or is done (true). */
    const drain = async (controller) => {
      for (;;) {
        const event = rewriter.next();
        switch (event.tag) {
          case 'output':
            if (event.val.length > 0) controller.enqueue(event.val);
            break;
          case 'need-input':
            return false;
          case 'finished':
            return true;
          default:
            await stop(event);
        }
      }
    };

    const fail = (controller, error) => {
      finish();
      if (reader) reader.cancel(error).catch(() => {});
      const message = error && error.payload !== undefined ? String(error.payload) : null;
      controller.error(message !== null ? new TypeError(message) : error);
    };

    const body = new ReadableStream({
      async pull(controller) {
        try {
          for (;;) {
            const input = reader ? await reader.read() : { done: true };
            if (input.done) {
              rewriter.end();
              await drain(controller);
              finish();
              controller.close();
              return;
            }
            const bytes = typeof input.value === 'string' ? encoder.encode(input.value) : new Uint8Array(input.value.buffer, input.value.byteOffset, input.value.byteLength);
            for (let at = 0; at < bytes.length; at += CHUNK) {
              rewriter.write(bytes.subarray(at, at + CHUNK));
              await drain(controller);
            }
            if (controller.desiredSize <= 0 || bytes.length > 0) return;
          }
        } catch (error) {
          fail(controller, error);
        }
      },
      cancel(reason) {
        finish();
        if (reader) return reader.cancel(reason);
        return undefined;
      },
    });
    const headers = new Headers(response.headers);
    headers.delete('content-length');
    return new Response(body, { status: response.status, statusText: response.statusText, headers });
  }
}

// HTMLRewriter on a page that arrives in chunks cut mid-tag: attributes,
// inserted content (text and HTML), inner content, removal, end tags,
// text and comment handlers, the doctype and the document's end.
const PAGE = [
  '<!DOCTYPE html><html><head><title>Old title</title></head><bo',
  'dy class="page"><h1 id="top">Hello <em>world</em></h1><!-- drop me --><p>Keep ',
  'this <b>bold</b> text & more</p><a href="/docs" data-x="1">Docs</a><a href="https://other.example/">Out</a>',
  '<img src="/logo.png"><ul><li>one</li><li>two</li></ul><div class="ad">buy!</div><script>let x = "<b>";</script></body></html>',
];

function page() {
  const encoder = new TextEncoder();
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i === PAGE.length) return controller.close();
      controller.enqueue(encoder.encode(PAGE[i++]));
    },
  });
}

class LinkRewriter {
  constructor(origin) {
    this.origin = origin;
  }
  element(el) {
    const href = el.getAttribute('href');
    if (href && href.startsWith('/')) el.setAttribute('href', this.origin + href);
    else el.setAttribute('rel', 'noopener');
    el.removeAttribute('data-x');
  }
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const seen = [];
    const rewriter = new HTMLRewriter()
      .on('title', { text(t) { if (t.text) t.replace('New title'); } })
      .on('h1#top', {
        element(el) {
          seen.push(`${el.tagName}#${el.getAttribute('id')} ${el.hasAttribute('class')}`);
          el.prepend('→ ', { html: false });
          el.onEndTag((end) => { end.after('<hr>', { html: true }); });
        },
      })
      .on('a[href]', new LinkRewriter('https://example.com'))
      .on('img', { element(el) { el.setAttribute('loading', 'lazy'); el.before('<figure>', { html: true }); el.after('</figure>', { html: true }); } })
      .on('li', { element(el) { el.setInnerContent('<i>item</i>', { html: true }); } })
      .on('div.ad', { element(el) { el.remove(); } })
      .on('p b', { element(el) { el.removeAndKeepContent(); } })
      .on('body', {
        comments(c) { seen.push(`comment:${c.text.trim()}`); c.remove(); },
        element(el) { el.tagName = 'body'; el.append('<footer>made at the edge</footer>', { html: true }); },
      })
      .onDocument({
        doctype(d) { seen.push(`doctype:${d.name}`); },
        end(end) { end.append(`<!-- ${seen.join(' | ')} -->`, { html: true }); },
      });
    if (url.pathname === '/html/escape') {
      const r = new HTMLRewriter().on('p', { element(el) { el.append('<not a tag> & "quotes"'); } });
      return r.transform(new Response('<p>x</p>', { headers: { 'content-type': 'text/html' } }));
    }
    if (url.pathname === '/html/async') {
      const r = new HTMLRewriter().on('p', {
        async element(el) {
          await scheduler.wait(5);
          el.setAttribute('data-async', 'yes');
        },
      });
      return r.transform(new Response('<p>one</p><p>two</p>', { headers: { 'content-type': 'text/html' } }));
    }
    if (url.pathname === '/html/bad-selector') {
      try {
        new HTMLRewriter().on('div[', { element() {} }).transform(new Response('<div></div>'));
        return new Response('accepted');
      } catch (e) {
        return new Response(e.name, { status: 400 });
      }
    }
    return rewriter.transform(new Response(page(), { headers: { 'content-type': 'text/html; charset=utf-8', 'content-length': '9999' } }));
  },
};

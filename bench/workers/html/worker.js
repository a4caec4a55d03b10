// The HTMLRewriter Worker of bench/workers.sh, the same file on edge and
// workerd: a 64 KiB page (built once, at load) streamed in 8 KiB chunks
// through a rewriter that makes links absolute, lazy-loads images, drops
// comments and appends to the body.
const parts = ['<!DOCTYPE html><html><head><title>Bench page</title></head><body>'];
for (let i = 0; parts.join('').length < 64 * 1024; i++) {
  parts.push(
    `<section id="s${i}"><h2>Section ${i}</h2><!-- section ${i} -->` +
      `<p>Paragraph ${i} with <a href="/docs/${i}">a link</a> and <a href="https://other.example/${i}">another</a>.</p>` +
      `<img src="/img/${i}.png" alt="picture ${i}"><ul><li>one</li><li>two</li></ul></section>`,
  );
}
parts.push('</body></html>');
const PAGE = new TextEncoder().encode(parts.join(''));
const CHUNK = 8192;

function page() {
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= PAGE.length) return controller.close();
      controller.enqueue(PAGE.slice(at, at + CHUNK));
      at += CHUNK;
    },
  });
}

export default {
  async fetch() {
    return new HTMLRewriter()
      .on('a[href]', {
        element(el) {
          const href = el.getAttribute('href');
          if (href.startsWith('/')) el.setAttribute('href', `https://example.com${href}`);
          else el.setAttribute('rel', 'noopener');
        },
      })
      .on('img', { element(el) { el.setAttribute('loading', 'lazy'); } })
      .on('body', {
        comments(c) { c.remove(); },
        element(el) { el.append('<footer>rewritten</footer>', { html: true }); },
      })
      .transform(new Response(page(), { headers: { 'content-type': 'text/html; charset=utf-8' } }));
  },
};

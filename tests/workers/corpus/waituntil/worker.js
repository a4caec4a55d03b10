// ctx.waitUntil: work that runs on after the response is sent. The work
// waits, then reports to the URL in `x-notify` whether the response had
// been sent by then.
export default {
  async fetch(request, env, ctx) {
    const notify = request.headers.get('x-notify');
    const wait = Number(new URL(request.url).searchParams.get('wait') || '300');
    const started = Date.now();
    ctx.waitUntil(
      (async () => {
        await scheduler.wait(wait);
        await fetch(`${notify}?waited=${Date.now() - started >= wait}`);
      })(),
    );
    ctx.waitUntil(Promise.reject(new Error('a failed side task')));
    return new Response('answered before the work ends');
  },
};

// The hello Worker of bench/workers.sh, the same file on edge and workerd.
export default {
  async fetch() {
    return new Response('Hello World!', { headers: { 'content-type': 'text/plain' } });
  },
};

"""A Spin app written with Spin's Python SDK (spin-sdk 3.4.1), as Spin's
http-py template builds it (`componentize-py -w spin-http componentize app`):

- `GET /` answers "Hello from Python!" (the template's answer);
- `GET /var/NAME` reads a variable;
- `GET|PUT|DELETE /kv/KEY` on the default store, `GET /kv` lists its keys
  sorted, `GET /kv-open/LABEL` opens another store (the error's repr);
- `GET /fetch?URL` sends a GET there and answers its status and body.

SQLite is left out: spin-sdk 3.4.1's `spin_sdk.sqlite` imports a bindings
module (`spin_sdk.wit.imports.sqlite`) that componentize-py 0.17.2 (the
version its template pins) generates under another name, so it fails to
import on any host.
"""

from spin_sdk import http, key_value, variables
from spin_sdk.http import Request, Response


def text(status: int, body: str) -> Response:
    return Response(status, {"content-type": "text/plain"}, bytes(body, "utf-8"))


class IncomingHandler(http.IncomingHandler):
    def handle_request(self, request: Request) -> Response:
        path, _, query = request.uri.partition("?")
        try:
            return self.route(request, path, query)
        except Exception as e:
            return text(500, repr(e))

    def route(self, request: Request, path: str, query: str) -> Response:
        if path == "/":
            return text(200, "Hello from Python!")
        if path.startswith("/var/"):
            return text(200, variables.get(path[len("/var/"):]))
        if path.startswith("/kv-open/"):
            key_value.open(path[len("/kv-open/"):])
            return text(200, "opened")
        if path == "/kv":
            with key_value.open_default() as store:
                return text(200, "\n".join(sorted(store.get_keys())))
        if path.startswith("/kv/"):
            key = path[len("/kv/"):]
            with key_value.open_default() as store:
                if request.method == "PUT":
                    store.set(key, request.body or b"")
                    return text(200, "stored")
                if request.method == "DELETE":
                    store.delete(key)
                    return text(200, "deleted")
                value = store.get(key)
                if value is None:
                    return text(404, "no such key")
                return Response(200, {"content-type": "application/octet-stream"}, value)
        if path == "/fetch":
            answer = http.send(Request("GET", query, {}, None))
            return text(200, f"{answer.status} {(answer.body or b'').decode('utf-8')}")
        return text(404, "no such route")

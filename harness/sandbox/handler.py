"""The sandbox's HTTP face: the server (127.0.0.1, threads, quiet) and the request handler that
reads a request by the mapping in httpmap.py and writes what crashlab.sandbox.server decided."""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .httpmap import AUTHORITY, INBOX_PATH, ROUTES

MAX_BODY = 1 << 20          # a request body of at most 1 MiB


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 64

    def handle_error(self, request, client_address) -> None:   # quiet: a broken client is not our error
        return


class Handler(BaseHTTPRequestHandler):
    sandbox: Any      # the Sandbox this handler class was made for
    protocol_version = "HTTP/1.1"          # keep-alive: a client reuses its connection
    disable_nagle_algorithm = True         # TCP_NODELAY: no 40 ms stall on delayed ACK
    timeout = 60                           # an idle kept-alive connection is closed after this

    def log_message(self, format, *args) -> None:   # quiet: the trace is the log
        return

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        sb = self.sandbox
        parts = urlsplit(self.path)
        segs = [unquote(s) for s in parts.path.strip("/").split("/")]
        if len(segs) < 3 or segs[0] != "w":
            return self._problem(404, "bad_request", "paths are /w/{worker}/{service}/{operation} "
                                 "(docs/integration.md, HTTP mapping)")
        caller = sb.caller(segs[1])
        if caller is None:
            return self._problem(404, "bad_request", f"no worker {segs[1]!r} here: use the base URL you were "
                                 "started with (/w/{run}.w{number})")
        if not sb.admit(caller):
            self.close_connection = True       # past its request budget: no answer
            return
        body = self._body(method)
        if body is None:
            return
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if segs[2] == INBOX_PATH and len(segs) == 3 and method == "GET":
            try:
                after = int(query.get("after_seq", "0"))
            except ValueError:
                return self._problem(400, "bad_request", "after_seq must be an integer")
            return self._send(200, sb.poll(caller, after))
        svc = sb.services.get(segs[2])
        op = segs[3] if len(segs) > 3 else "describe"
        if segs[2] == "authority" and svc is None:
            route = AUTHORITY.get(op)
        else:
            route = ROUTES.get(svc.kind, {}).get(op) if svc is not None else None
        if route is None or len(segs) > 4:
            return self._problem(404, "bad_request", f"no operation {'/'.join(segs[2:])!r} (services: "
                                 f"{', '.join(sb.services)}, and authority; docs/integration.md)")
        if route.method != method:
            return self._problem(405, "bad_request", f"{op} is {route.method}")
        if method == "GET":
            args: dict = {}
            for name in route.params:
                if name in query:
                    value: Any = query[name]
                    if name in route.ints:
                        try:
                            value = int(value)
                        except ValueError:
                            return self._problem(400, "bad_request", f"{name} must be an integer")
                    args[name] = value
        else:
            args = {k: v for k, v in body.items() if k in route.params}
        if route.keyed:
            key = self.headers.get("Idempotency-Key")
            args["key"] = key if key else None
        answer = sb.request(caller, svc.name if svc is not None else "authority", op, args)
        try:
            if answer.status == 0:
                self.close_connection = True       # no status line: the connection just closes
            elif answer.error is not None:
                self._send(answer.status, {"error": answer.wire or answer.error.to_json()}, answer.headers)
            else:
                self._send(200, answer.value)
        finally:
            if answer.written is not None:         # a paused worker's answer: its supervisor resumes it now
                answer.written.set()

    def _body(self, method: str) -> dict | None:
        if method != "POST":
            return {}
        coding = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        if coding:
            if coding != "chunked" or self.headers.get("Content-Length") is not None:
                self.close_connection = True      # what is left of the body cannot be read as a request
                self._problem(400, "bad_request", "a POST body is sent with a Content-Length or as "
                              "Transfer-Encoding: chunked alone (got Transfer-Encoding: "
                              f"{coding}{', with a Content-Length' if coding == 'chunked' else ''})")
                return None
            raw = self._chunked()
            if raw is None:
                return None
        else:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self.close_connection = True
                self._problem(413 if length > MAX_BODY else 400, "bad_request",
                              f"a POST needs a Content-Length of at most {MAX_BODY} bytes")
                return None
            raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._problem(400, "bad_request", "the body must be one JSON object")
            return None
        return body

    def _chunked(self) -> bytes | None:
        """A chunked body, read whole (at most MAX_BODY bytes); None after answering 400 or 413."""
        data = bytearray()
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                size = -1
            if size < 0 or not line.endswith(b"\n"):
                self.close_connection = True
                self._problem(400, "bad_request", "a chunked POST body is malformed (a chunk size line is not hex)")
                return None
            if len(data) + size > MAX_BODY:
                self.close_connection = True
                self._problem(413, "bad_request", f"a POST body may be at most {MAX_BODY} bytes")
                return None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):   # trailers, then the end
                    pass
                return bytes(data) or b"{}"
            data += self.rfile.read(size)
            self.rfile.readline(1024)          # the CRLF after the chunk

    def _problem(self, status: int, code: str, message: str) -> None:
        self._send(status, {"error": {"code": code, "definite": True, "message": message}})

    def _send(self, status: int, payload: Any, headers: dict | None = None) -> None:
        data = json.dumps(payload, sort_keys=True).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Crashlab-Now", str(self.sandbox.clock.now()))   # the scenario clock, in ms
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True   # the worker went away (killed): nothing to answer


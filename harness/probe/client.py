"""The probe's HTTP side: which hosts it may reach, the hard request budget, and one exchange
(request and answer) as the probe records it. Standard library only (http.client)."""
from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import quote, urlsplit

from ..vocab.errors import UsageError
from .mapping import _PLACEHOLDER, ProbeMap, Request

MAX_ANSWER = 1 << 20        # an answer body of at most 1 MiB is read


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_target(url: str, pmap: ProbeMap, allow_hosts: tuple[str, ...] = ()) -> tuple[str, str, int, str]:
    """(scheme, host, port, base path) of a URL the probe may reach: loopback, or a host named
    with --allow-host whose mapping file declares it a test or sandbox endpoint."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{url!r} is not an http:// or https:// URL with a host",
                         hint="e.g. http://127.0.0.1:8080/w/run-82.w1 (a worker base URL `crashlab sandbox serve` "
                              "prints)")
    if parts.query or parts.fragment:
        raise UsageError(f"{url!r}: give the base URL without a query or fragment; the mapping file's paths "
                         "are appended to it")
    host = parts.hostname
    if not is_loopback(host):
        if host not in allow_hosts:
            raise UsageError(f"{host} is not loopback: crashlab probe sends requests that create effects, so it "
                             "reaches another host only when you name it",
                             hint=f"pass --allow-host {host} and declare 'endpoint: test' (or sandbox) in the "
                                  "mapping file, for a test endpoint only")
        if pmap.endpoint is None:
            raise UsageError(f"{pmap.file}: --allow-host {host} is given, but the mapping file does not declare "
                             "the endpoint a test one", hint="add 'endpoint: test' (or sandbox) to the mapping "
                                                             "file, only if it is one")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UsageError(f"{url!r} has no valid port number") from None
    return parts.scheme, host, port, parts.path.rstrip("/")


class BudgetExhausted(UsageError):
    """The probe would send more requests than --budget allows (nothing beyond it is sent)."""


@dataclass(slots=True)
class Exchange:
    """One request the probe sent and what came back (status 0: no answer)."""

    n: int
    step: str
    method: str
    path: str
    key: str | None
    status: int = 0
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    note: str = ""              # what the probe read from the answer (a reference, found or not)
    refused: bool = False       # the connection was refused: nothing was sent
    not_json: bool = False      # the answer had a body that is not JSON (kept in ``body`` as text)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def code(self) -> str | None:
        """An error answer's code, when it names one ({"error": {"code"}} or {"code"})."""
        body = self.body if isinstance(self.body, dict) else {}
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            return err["code"]
        if isinstance(err, str):
            return err
        return body.get("code") if isinstance(body.get("code"), str) else None

    def brief(self) -> str:
        what = (f"{self.status}" + (f" {self.code()}" if self.code() and not self.ok else "")) if self.status \
            else f"no answer ({self.error})"
        key = f" key {self.key}" if self.key else ""
        return f"#{self.n} {self.method} {self.path.split('?')[0]}{key} -> {what}" + (f", {self.note}" if self.note else "")


class Client:
    """Sends the mapped requests, at most ``budget`` of them, and keeps every exchange."""

    def __init__(self, url: str, pmap: ProbeMap, *, budget: int, allow_hosts: tuple[str, ...] = (),
                 timeout_s: float = 5.0) -> None:
        self.scheme, self.host, self.port, self.base = check_target(url, pmap, allow_hosts)
        self.pmap, self.budget, self.timeout_s = pmap, budget, timeout_s
        self.sent: list[Exchange] = []
        self._lock = threading.Lock()

    def render(self, req: Request, values: dict) -> tuple[str, bytes | None, dict]:
        """The request's path, body and headers with the placeholders filled in."""
        path = _fill_text(req.path, values, url=True)
        headers = {"Accept": "application/json"}
        body = None
        if req.body is not None or (self.pmap.key_field and req.name == "effect" and values.get("key")):
            doc = _fill(dict(req.body or {}), values)
            if self.pmap.key_field and values.get("key") is not None and req.name in ("effect", "release"):
                doc[self.pmap.key_field] = values["key"]
            body = json.dumps(doc, sort_keys=True).encode()
            headers["Content-Type"] = "application/json"
        if self.pmap.key_header and values.get("key") is not None and req.name in ("effect", "release"):
            headers[self.pmap.key_header] = values["key"]
        return self.base + path, body, headers

    def send(self, step: str, req: Request, values: dict) -> Exchange:
        path, body, headers = self.render(req, values)
        with self._lock:
            if len(self.sent) >= self.budget:
                raise BudgetExhausted(f"the request budget ({self.budget}) is spent; the probe sends no more",
                                      hint="raise --budget")
            ex = Exchange(n=len(self.sent) + 1, step=step, method=req.method, path=path[len(self.base):],
                          key=values.get("key")
                          if req.name in ("effect", "lookup", "release") else None)
            self.sent.append(ex)
        conn_cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(self.host, self.port, timeout=self.timeout_s)
        # --timeout bounds the whole exchange, not each read: a server that dribbles its answer a
        # byte at a time is cut off when the time is up, and what it sent is no answer
        expired = threading.Event()

        def cut() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        timer = threading.Timer(self.timeout_s, cut)
        timer.daemon = True
        timer.start()
        try:
            conn.request(req.method, path, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read(MAX_ANSWER)
            if expired.is_set():
                raise TimeoutError(f"no whole answer within {self.timeout_s:g} s (--timeout bounds the whole request)")
            ex.status, ex.headers = resp.status, {k.lower(): v for k, v in resp.getheaders()}
            try:
                ex.body = json.loads(raw) if raw.strip() else None
            except (ValueError, RecursionError):
                ex.body, ex.not_json = raw.decode("utf-8", "replace")[:200], True
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set() and not isinstance(exc, TimeoutError):
                exc = TimeoutError(f"no whole answer within {self.timeout_s:g} s (--timeout bounds the whole request)")
            ex.error = type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"[:120]
            ex.refused = isinstance(exc, ConnectionRefusedError)   # refused at connect: no byte left
        finally:
            timer.cancel()
            conn.close()
        return ex


def _fill_text(text: str, values: dict, *, url: bool = False) -> str:
    def one(m: re.Match) -> str:
        value = _lookup(m[1], values)
        text_value = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        return quote(text_value, safe="") if url else text_value
    return _PLACEHOLDER.sub(one, text)


def _fill(value: Any, values: dict) -> Any:
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return _lookup(whole[1], values)
        return _fill_text(value, values)
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


def _lookup(name: str, values: dict) -> Any:
    if name.startswith("intent."):
        return (values.get("intent") or {}).get(name[len("intent."):])
    return values.get(name)


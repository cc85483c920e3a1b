"""A one-connection-per-request HTTP client for the sandbox, with a classified outcome.

No client-side retry and no kept-alive connection (a kept-alive POST could be re-sent by a
library behind our back). Every answer is classified: `ok`, `definite` (the request certainly
did not execute, or certainly failed), or `ambiguous` (it may have executed).
"""
import http.client
import json
import urllib.parse


class Outcome:
    def __init__(self, kind, status=None, body=None, code=None, detail="", retry_after_ms=None):
        self.kind, self.status, self.body, self.code = kind, status, body, code
        self.detail, self.retry_after_ms = detail, retry_after_ms

    def __repr__(self):
        return f"Outcome({self.kind}, {self.status}, {self.code}, {self.detail!r})"


class Client:
    def __init__(self, base_url, timeout_s=12.0):
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port, self.prefix = u.hostname, u.port, u.path.rstrip("/")
        self.timeout_s = timeout_s

    def request(self, method, path, body=None, key=None, query=None):
        url = self.prefix + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Connection": "close"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if key:
            headers["Idempotency-Key"] = key
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            try:
                conn.request(method, url, body=data, headers=headers)
            except OSError as exc:
                # refused or reset while sending: over loopback indistinguishable from a close
                # after sending (docs/integration.md), so it stays ambiguous for an effect
                return Outcome("ambiguous", detail=f"send failed: {exc!r}")
            try:
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                return Outcome("ambiguous", detail=f"no answer: {exc!r}")
        finally:
            conn.close()
        try:
            parsed = json.loads(raw.decode() or "null")
        except ValueError:
            parsed = None
        if resp.status == 200:
            return Outcome("ok", resp.status, parsed)
        err = (parsed or {}).get("error", {}) if isinstance(parsed, dict) else {}
        code = err.get("code")
        retry_ms = resp.getheader("Retry-After-Ms")
        retry_ms = float(retry_ms) if retry_ms else None
        definite = bool(err.get("definite")) if err else resp.status < 500
        return Outcome("definite" if definite else "ambiguous", resp.status, parsed, code,
                       err.get("message", ""), retry_ms)

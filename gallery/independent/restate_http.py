"""A one-request-per-connection HTTP client: it never retries on its own (one retry owner)."""
import http.client
import json
import urllib.parse


class Answer:
    def __init__(self, status, body, headers):
        self.status, self.body, self.headers = status, body, headers

    @property
    def now(self):
        v = self.headers.get("crashlab-now")
        return int(float(v)) if v is not None else None

    @property
    def error(self):
        return (self.body or {}).get("error") or {}

    @property
    def definite(self):
        return bool(self.error.get("definite"))


class Closed(Exception):
    """The connection closed or timed out with no status line: the outcome is unknown."""


class Client:
    def __init__(self, base, timeout=30.0):
        u = urllib.parse.urlsplit(base)
        self.host, self.port, self.prefix, self.timeout = u.hostname, u.port, u.path.rstrip("/"), timeout
        self.last_now = None

    def call(self, method, path, body=None, headers=None, timeout=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            hdrs = {"Content-Type": "application/json", "Connection": "close"}
            hdrs.update(headers or {})
            conn.request(method, self.prefix + path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise Closed(repr(exc)) from exc
        finally:
            conn.close()
        hs = {k.lower(): v for k, v in resp.getheaders()}
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        ans = Answer(resp.status, parsed, hs)
        if ans.now is not None:
            self.last_now = ans.now
        return ans

    def get(self, path, **query):
        q = ("?" + urllib.parse.urlencode(query)) if query else ""
        return self.call("GET", path + q)

    def post(self, path, body, key=None):
        return self.call("POST", path, body, {"Idempotency-Key": key} if key else None)

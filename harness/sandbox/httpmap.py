"""The sandbox's HTTP mapping, as data: each service operation's method, path and parameters,
each error code's status, and each fault's behaviour on the socket. docs/integration.md
shows these tables; the server (server.py) reads them and nothing else decides a status.

Paths are relative to a worker's base URL, ``http://127.0.0.1:PORT/w/{worker}``: the first
segment names the caller, so the sandbox knows who sent a request without any header.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Route:
    op: str
    method: str                 # GET (arguments in the query) | POST (a JSON object body)
    params: tuple[str, ...]     # GET: the query parameters; POST: the body fields it reads
    keyed: bool = False         # the Idempotency-Key header carries the request's key
    ints: tuple[str, ...] = ()  # query parameters read as integers


#: service kind -> operation -> route; the path is ``/{service}/{op}`` (``describe``: ``/{service}``).
ROUTES: dict[str, dict[str, Route]] = {
    "reservation": {r.op: r for r in (
        Route("describe", "GET", ()),
        Route("reserve", "POST", ("intent", "fence", "retry_owner", "proposal_hash"), keyed=True),
        Route("release", "POST", ("ref", "intent", "fence", "retry_owner", "proposal_hash"), keyed=True),
        Route("lookup", "GET", ("key",)),
        Route("search", "GET", ("incident", "slot")),
        Route("aggregate", "GET", ("part",)),
    )},
    "notification": {r.op: r for r in (
        Route("describe", "GET", ()),
        Route("send", "POST", ("intent", "retry_owner", "proposal_hash"), keyed=True),
    )},
    "registry": {r.op: r for r in (
        Route("describe", "GET", ()),
        Route("publish", "POST", ("intent", "retry_owner", "proposal_hash"), keyed=True),
        Route("get_version", "GET", ("package", "version")),
        Route("wait_job", "GET", ("job_id", "wait_ms"), ints=("wait_ms",)),
    )},
}

#: The authority port (crashlab.sandbox.authority): ``/authority/{op}``, for every run.
AUTHORITY: dict[str, Route] = {r.op: r for r in (
    Route("request", "POST", ("proposal_hash", "action")),
    Route("check", "GET", ("proposal_hash", "action")),
)}

#: The worker's inbox: ``GET /inbox?after_seq=N`` -> ``{"events": [...]}`` (the scenario's
#: intake, cancellations, callbacks, duplicates, in crashlab's inbox shape).
INBOX_PATH = "inbox"

#: error code -> HTTP status. The body is always ``{"error": {"code", "definite", "message"}}``.
STATUS: dict[str, int] = {
    "validation_failed": 400, "bad_request": 400, "permission_denied": 403, "not_found": 404,
    "conflict_in_flight": 409, "already_exists": 409, "fenced": 412, "intent_mismatch": 422,
    "throttled": 429, "server_error": 502, "unavailable": 503,
}

#: fault -> (status or socket behaviour, committed?, what the worker sees). Durations are the
#: scenario's, divided by the time scale.
FAULTS: dict[str, tuple[str, str, str]] = {
    "refused": ("connection closed at once, nothing read into the service", "no",
                "a closed connection (over loopback it cannot be told from one closed after sending)"),
    "timeout_before_send": ("held for the profile's timeout_ms, then closed", "no",
                            "a closed connection after its timeout"),
    "throttled": ("429, `Retry-After` (seconds, rounded up) and `Retry-After-Ms`", "no",
                  "429 with the scaled delay (rule delay, default 1 s)"),
    "unavailable": ("503 before the service", "no", "503"),
    "error": ("the rule's code (default 503) before the service", "no", "that status"),
    "drop_request": ("held for timeout_ms, then closed with no answer", "no",
                     "no answer, then a closed connection"),
    "late_arrival": ("held (a same-key request meets 409, a lookup reports in_flight), closed with no answer "
                     "at timeout_ms; committed after the rule's delay", "later",
                     "no answer; the effect lands afterwards"),
    "server_error_before": ("503 without committing (a proxy may re-send: proxy_retries)", "no", "503"),
    "server_error_after": ("committed, then 502", "yes", "502"),
    "lost_response": ("committed, held for timeout_ms, then the connection closed with no answer", "yes",
                      "a closed connection with no status line"),
    "duplicate_delivery": ("committed and answered; the request is executed again after the delay", "yes",
                           "200; a second delivery follows"),
}

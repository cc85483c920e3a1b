"""Which answers are the service's own, and so evidence about what it does with a key.

An answer the probe interprets must come from the service behind the mapped path: a refusal it
chose (409 in flight, 422 changed intent, 400 or 403 for the ``failing`` intent), a read that says
found or not, an effect that names its reference. Some answers say nothing about keys, and reading
them as if they did writes false claims (every request answered 404 looks like "the error answer
was replayed under its key"):

- a redirect (3xx): the probe follows none, so the service never saw the request;
- a body that is not JSON (an HTML page, plain text): a web server's or a proxy's, not the API's;
- a 404 or 405 for a path the service does not serve: the URL's base path or the mapping file's
  path is wrong. The sandbox says which (its answer carries ``Crashlab-Now`` and a message naming
  the unknown worker or operation); elsewhere, a 404 from a request the service has not yet
  answered otherwise is one, except a read whose answer says "not found" in the map's terms;
- a success of the wrong shape per the mapping file (an effect without ``answers.ref``, a read
  without ``answers.found``, a search without ``answers.records``);
- a refusal of the very first request (the base intent under a new key): the probe can compare
  nothing after it;
- a refusal for a reason that is not about keys (``foreign``): an authentication failure (401,
  407), a permission refusal (403) of anything but an intent that differs from the accepted one
  (``changed``, ``failing``, and the failing intent's answer replayed at ``after_error``), 410
  Gone, and any 4xx but 409, 412, 422 or 429 to the intent the service accepted at the first
  request (``again``, ``race``, ``midway``, ``later``: a 404 there too), or at ``after_error`` one
  that is neither the error's answer again nor 400, 409, 412, 422 or 429.

The first such answer stops the plan: what was made is released, and no profile is written.
"""
from __future__ import annotations

from dataclasses import dataclass

from .client import Exchange
from .mapping import ProbeMap, dig

#: error codes that mean "no such key" in a read's 404 (the honest negative, not a routing failure)
NOT_FOUND_CODES = ("not_found", "notfound", "resource_missing", "no_such_key", "missing")
#: refusals a service gives about a key, even to the intent it accepted: a request with the key in
#: flight or a conflict (409), fenced (412), a changed intent (422), throttled (429)
KEY_REFUSALS = (409, 412, 422, 429)
#: a refusal the service chose for a request it understood (docs/probe.md): a bad intent or an
#: operation it does not offer (400, as crashlab's sandbox answers a read or a release it lacks), a
#: conflict (409), fenced (412), a changed intent (422). Only these show "cannot" (compensation:
#: false, lookup: none) or "the key stays bound to the failed request" (error_replay: true)
REFUSALS = (400, 409, 412, 422)
#: the steps that send the intent the service accepted at the first request
ACCEPTED = ("again", "race", "midway", "later")
#: the steps whose intent differs from the accepted one: a refusal may depend on its fields
OTHER_INTENT = ("changed", "error")


@dataclass(frozen=True, slots=True, kw_only=True)
class NotEvidence:
    """The first answer that is not the service's own: which, what it is, what to check."""

    exchange: str       # the exchange, as the probe prints it (number, method, path, key, status)
    what: str           # what the answer is
    check: str          # what to check

    def message(self) -> str:
        return f"{self.exchange}: {self.what}"


def said(ex: Exchange) -> str | None:
    """The message an error answer carries, if any (error.message, message, detail), shortened."""
    body = ex.body if isinstance(ex.body, dict) else {}
    err = body.get("error")
    for text in ((err.get("message") if isinstance(err, dict) else None), body.get("message"), body.get("detail")):
        if isinstance(text, str) and text.strip():
            text = " ".join(text.split())
            return text if len(text) <= 160 else text[:157] + "..."
    return None


def _route(pmap: ProbeMap, request: str) -> str:
    req = pmap.requests[request]
    return f"the mapping file's requests.{request} ({req.method} {req.path.split('?')[0]})"


def same_answer(ex: Exchange, other: Exchange | None) -> bool:
    """The same refusal: the same status and error code."""
    return other is not None and not other.ok and ex.status == other.status and ex.code() == other.code()


def foreign(pmap: ProbeMap, step: str, request: str, ex: Exchange, error: Exchange | None = None
            ) -> tuple[str, str] | None:
    """(what, check) when ``ex`` is a 4xx that refuses the request for a reason that is not about keys,
    so that no field may rest on it; ``error``: the ``error`` step's answer (``after_error`` may
    replay it). None for every other answer (judged elsewhere)."""
    status = ex.status
    if not 400 <= status < 500:
        return None
    told = said(ex)
    tail = f" ({told})" if told else ""
    if status in (401, 407):
        return (f"an authentication failure{tail}: the endpoint did not let the request in",
                "the URL (is it the test endpoint you mean?) and the credentials the endpoint wants")
    if status == 403 and step not in OTHER_INTENT and not (step == "after_error" and same_answer(ex, error)):
        return (f"a permission refusal{tail} of a request whose intent is not refused for its fields (only the "
                "changed and the failing intent may meet 403): it is about the caller",
                "the credentials the endpoint wants and the URL")
    if status == 410:
        return (f"the endpoint says the resource is gone{tail}",
                "the URL's base path and " + _route(pmap, request))
    if step in ACCEPTED and status not in KEY_REFUSALS:
        return (f"the intent the service accepted at #1 was refused{tail}; a service refuses it again only as "
                "in flight (409), fenced (412), changed (422) or throttled (429)",
                "the URL, the credentials the endpoint wants and " + _route(pmap, request))
    if step == "after_error" and status not in REFUSALS + (429,) and not same_answer(ex, error):
        return (f"the good intent after the error was refused{tail} with neither the error's answer again nor a "
                "refusal about its key (400, 409, 412, 422, 429)",
                "the URL, the credentials the endpoint wants and " + _route(pmap, request))
    return None


def judge(pmap: ProbeMap, step: str, request: str, ex: Exchange, served: set[str], *,
          error: Exchange | None = None) -> NotEvidence | None:
    """None when ``ex`` is the service's own answer to the mapped ``request``; otherwise why not.
    ``served``: the requests the service has already answered as its own in this probe (a path that
    answered once is one it serves, so a later 404 on it is the service's own answer, except to the
    intent it accepted). ``error``: the answer of the ``error`` step (``after_error`` may replay it)."""
    if not ex.status:
        return None                                     # no answer: the plan's own rules (unknown, stopped)
    brief = ex.brief()
    if 300 <= ex.status < 400:
        where = ex.headers.get("location")
        return NotEvidence(exchange=brief, what="a redirect" + (f" to {where}" if where else "")
                           + "; the probe follows none, so the service never saw the request",
                           check="the URL: give the one the service answers at itself (scheme, host, port and "
                                 "base path)")
    if ex.not_json:
        kind = (ex.headers.get("content-type") or "no content type").split(";")[0].strip()
        return NotEvidence(exchange=brief, what=f"the body is not JSON ({kind}), so it is not the API's answer",
                           check="the URL's base path and " + _route(pmap, request)
                           + ": a page like this usually comes from a web server or a proxy in front of the API")
    sandbox = "crashlab-now" in ex.headers
    if ex.status in (404, 405) and sandbox and ex.code() == "bad_request":
        text = said(ex) or ""
        if text.startswith("no worker"):
            what, check = "the URL's worker path is not one the service serves", (
                "the URL's worker path: `crashlab sandbox serve` prints the worker base URL of each of its runs "
                "(http://127.0.0.1:PORT/w/RUN.w1)")
        elif text.startswith("paths are"):
            what, check = "the URL is not a sandbox worker base URL", "the URL: give http://127.0.0.1:PORT/w/RUN.w1"
        else:
            what, check = "the sandbox does not serve this path", (
                _route(pmap, request) + " (docs/integration.md, HTTP mapping)")
        return NotEvidence(exchange=brief, what=what + (f" (the sandbox says: {text})" if text else ""), check=check)
    if ex.status == 405 or (ex.status == 404 and request not in served and not _negative(pmap, request, ex)):
        told = said(ex)
        return NotEvidence(exchange=brief, what=("the method is not allowed there" if ex.status == 405 else
                                                 "the service does not serve this path")
                           + (f" ({told})" if told else ""),
                           check="the URL's base path and " + _route(pmap, request) + " (and its method)")
    if ex.ok:
        shape = _shape(pmap, request, ex)
        if shape:
            return NotEvidence(exchange=brief, what=shape[0], check=shape[1])
    elif step == "first" and 400 <= ex.status < 500:
        told = said(ex)
        return NotEvidence(exchange=brief, what="the first request (the intent under a new key) was refused"
                           + (f" ({told})" if told else "") + ", so no answer after it can be compared with it",
                           check="the mapping file's intent (every field the endpoint requires) and any "
                                 "credentials the endpoint wants")
    else:
        bad = foreign(pmap, step, request, ex, error)
        if bad is not None:
            return NotEvidence(exchange=brief, what=bad[0], check=bad[1])
    served.add(request)
    return None


def _negative(pmap: ProbeMap, request: str, ex: Exchange) -> bool:
    """A read's 404 that says "not found" in the map's terms: its ``answers.found`` field, or an error
    code naming a missing key."""
    if request not in ("lookup", "search"):
        return False
    at = pmap.answers.get("found" if request == "lookup" else "records")
    if at and dig(ex.body, at) is not None:
        return True
    code = (ex.code() or "").lower()
    return any(c in code for c in NOT_FOUND_CODES)


def _shape(pmap: ProbeMap, request: str, ex: Exchange) -> tuple[str, str] | None:
    """(what, check) for a success that lacks what the mapping file says it carries."""
    if request == "effect" and dig(ex.body, pmap.answers["ref"]) is None:
        return (f"a success whose answer names no reference at answers.ref ({pmap.answers['ref']}); the request "
                "may have made an effect the probe cannot name",
                f"the mapping file's answers.ref: where the effect's answer names its reference (the answer's "
                f"fields: {_fields(ex)})")
    if request == "lookup" and not isinstance(dig(ex.body, pmap.answers["found"]), bool):
        return (f"a read whose answer has no true/false at answers.found ({pmap.answers['found']})",
                f"the mapping file's answers.found (the answer's fields: {_fields(ex)})")
    if request == "search" and not isinstance(dig(ex.body, pmap.answers["records"]), list):
        return (f"a search whose answer has no list at answers.records ({pmap.answers['records']})",
                f"the mapping file's answers.records (the answer's fields: {_fields(ex)})")
    return None


def _fields(ex: Exchange) -> str:
    if isinstance(ex.body, dict):
        return ", ".join(sorted(ex.body)[:12]) or "none"
    return "none: it is " + ("empty" if ex.body is None else f"a JSON {type(ex.body).__name__}")

"""What the probe's answers mean, in AR-08's terms: each profile field the plan decided
(``observed``, with the exchanges that decided it), the notes beside them (replay marker, honest
negative, in-flight conflict, error replay) and the fields a probe cannot establish (``untested``:
the service owner declares them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..world.services import profile_conflicts
from .client import Exchange
from .contradict import contradictions, refuses_unmade
from .evidence import REFUSALS, _negative, foreign, said, same_answer
from .mapping import ProbeMap, dig
from .plan import PLAN, Observed, listed, ref_of

MEANING = {
    "semantic": "semantic deduplication: a retry under the same key gets the first answer, and the same key with "
                "another intent is refused; a changed intent needs a new key",
    "key_only": "key-only deduplication: the client must treat changed-intent reuse as a critical local error "
                "(the service answers the old effect as if it were the new one)",
    "none": "no deduplication: the key does not make a resend safe; an unknown outcome is resolved by a read, "
            "never by sending again",
    "by_key": "an authoritative read by key: a worker that lost an answer can reconcile SENT_UNKNOWN by key",
    "by_incident_slot": "a search by business fields only: reconciliation must tell its own effect from another "
                        "actor's by the intent it recorded",
    "lookup_none": "no read: an effect whose answer was lost stays unknown (FAILED_EFFECT_UNKNOWN or "
                   "DELIVERY_UNKNOWN), never assumed absent",
}
#: what no probe of this plan can establish: the service owner declares it
UNTESTED = {
    "max_delivery_delay": "the late-delivery bound: how long after a timeout a request can still land",
    "throttling": "throttling (429) and its Retry-After: the probe sends too few requests to meet it",
    "server_errors": "5xx answers and whether the request committed before one",
    "proxy_retries": "a proxy that re-sends on its own after a 5xx or a timeout",
    "fencing": "whether the service refuses a request with an older fencing token",
}
#: the profile fields each service kind can take from a probe
FIELDS = {"reservation": ("idempotency", "retention_ms", "lookup", "consistency", "lag_ms", "compensation",
                          "error_replay"),
          "notification": ("idempotency", "retention_ms", "error_replay")}


@dataclass(slots=True)
class Finding:
    status: str                         # observed | untested
    text: str
    value: Any = None                   # the profile value (observed fields)
    responses: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Profile:
    service: str
    fields: dict[str, Finding]          # profile knob -> finding (observed ones go in services:)
    notes: dict[str, Finding]           # evidence beside the knobs

    def services(self) -> dict[str, Any]:
        return {k: f.value for k, f in self.fields.items() if f.status == "observed" and k in FIELDS[self.service]}


def _brief(*exs: Exchange | None) -> list[str]:
    return [e.brief() for e in exs if e is not None]


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and a == b


def _marked(pmap: ProbeMap, ex: Exchange | None) -> bool:
    if ex is None or not ex.ok:
        return False
    at, header = pmap.answers.get("replayed"), pmap.answers.get("replayed_header")
    if at and dig(ex.body, at) is True:
        return True
    return bool(header and ex.headers.get(header.lower(), "false").lower() not in ("", "false", "0"))


def _distrust(pmap: ProbeMap, obs: Observed) -> tuple[Exchange, str] | None:
    """The first answer of the probe that refuses a request for a reason that is not about keys
    (an authentication failure, the accepted intent refused, ...: ``evidence.foreign``), and why.
    After one, no refusal decides a field: the endpoint may refuse everything. (``execute`` stops
    the plan there and the command writes no profile; this keeps ``interpret`` honest on its own.)"""
    requests = {s.name: s.request for s in PLAN}
    err = obs.one("error")
    seen = [(step, requests.get(step, "effect"), ex) for step, exs in obs.steps.items() for ex in exs]
    seen += [("release", "release", ex) for ex in obs.releases.values()]
    for step, request, ex in sorted(seen, key=lambda t: t[2].n):
        bad = foreign(pmap, step, request, ex, err) if request in pmap.requests else None
        if bad is not None:
            return ex, bad[0]
    return None


def _refusal(ex: Exchange) -> str:
    """A refusal as the evidence text shows it: status, code and the service's message."""
    told = said(ex)
    return f"{ex.status} {ex.code() or ''}".rstrip() + (f": {told}" if told else "")


def _unclear(ex: Exchange, field: str, check: str, distrust: tuple[Exchange, str] | None = None) -> str:
    """The evidence line of a field an answer did not decide: the request, the answer, what to check."""
    if distrust is not None:
        return (f"{ex.brief()} would decide it only from an endpoint that takes the probe's requests, and "
                f"{distrust[0].brief()} did not ({distrust[1]}); {field} is left for the service owner to declare: "
                f"check {check}, and probe again")
    if not ex.status or ex.status >= 500:
        why, check = "no answer the service stands by (none, or a 5xx)", "that the endpoint is up and healthy"
    elif ex.status == 429:
        why, check = "throttled", "the endpoint's rate limit (wait before probing again)"
    else:
        why = "not an answer that shows it (docs/probe.md, \"Which answers decide a field\")"
    return f"{ex.brief()}: {why}; {field} is left for the service owner to declare: check {check}, and probe again"


def interpret(pmap: ProbeMap, obs: Observed) -> Profile:
    f: dict[str, Finding] = {}
    notes: dict[str, Finding] = {}
    first, again, changed = obs.one("first"), obs.one("again"), obs.one("changed")
    r1, r2, r3 = ref_of(pmap, first), ref_of(pmap, again), ref_of(pmap, changed)
    distrust = _distrust(pmap, obs)

    # -- idempotency: the same key twice, then with another payload, then twice at once
    dedup = None
    if r1 is None:
        f["idempotency"] = Finding("untested", "the first effect request did not succeed, so nothing could be "
                                   "compared; check the mapping file's effect request and intent", None, _brief(first))
    elif r2 is None:
        f["idempotency"] = Finding("untested", _unclear(again, "idempotency", "the URL and the credentials the "
                                   "endpoint wants") if again is not None else "the repeated request was not sent",
                                   None, _brief(first, again))
    elif r2 != r1:
        dedup = False
        f["idempotency"] = Finding("observed", f"the same key and intent made a second effect ({r1}, then {r2}): "
                                   + MEANING["none"], "none", _brief(first, again))
    else:
        dedup = True
        notes["replay_marker"] = Finding("observed", "the repeated request was marked a replay" if _marked(pmap, again)
                                         else "the repeated request returned the same reference with no replay "
                                         "marker the mapping file names", None, _brief(again))
        if changed is not None and changed.status in REFUSALS and distrust is not None:
            f["idempotency"] = Finding("untested", "the same key replayed the first effect; " + _unclear(
                changed, "semantic or key_only", "the URL and the credentials the endpoint wants", distrust),
                None, _brief(first, again, changed))
        elif changed is not None and changed.status in REFUSALS:
            f["idempotency"] = Finding("observed", f"the same key with another payload was refused ({changed.status}"
                                       f" {changed.code() or ''}): " + MEANING["semantic"], "semantic",
                                       _brief(first, again, changed))
        elif _same(r3, r1):
            f["idempotency"] = Finding("observed", f"the same key with another payload returned the first effect "
                                       f"({r1}): " + MEANING["key_only"], "key_only", _brief(first, again, changed))
        elif r3 is not None:
            f["idempotency"] = Finding("observed", f"the same key with another payload made a second effect ({r3}): "
                                       "the key deduplicates only an identical payload, which crashlab's services "
                                       "cannot express, so the profile says none. " + MEANING["none"], "none",
                                       _brief(first, again, changed))
        else:
            f["idempotency"] = Finding("untested", "the same key replayed the first effect, but the changed payload "
                                       f"got {changed.brief() if changed else 'no request'}: declare semantic or "
                                       "key_only", None, _brief(first, again, changed))
    race = obs.steps.get("race") or []
    if race:
        refs = {ref_of(pmap, e) for e in race} - {None}
        if len(refs) > 1:
            notes["concurrency"] = Finding("observed", f"two concurrent sends under one new key made two effects "
                                           f"({', '.join(sorted(refs))})" + (": the deduplication is not atomic, so "
                                           "the profile says none" if dedup else ""), None, _brief(*race))
            if dedup:
                f["idempotency"] = Finding("observed", notes["concurrency"].text + ". " + MEANING["none"], "none",
                                           _brief(first, again, *race))
        elif any(e.status == 409 for e in race):
            notes["concurrency"] = Finding("observed", "two concurrent sends under one new key: one made the effect, "
                                           "the other met 409 (a request with the key is executing)", None,
                                           _brief(*race))
        elif len(refs) == 1 and all(e.ok for e in race):
            notes["concurrency"] = Finding("observed", "two concurrent sends under one new key made one effect "
                                           "(the later one was answered with it)", None, _brief(*race))

    # -- retention: the first key again during and after the wait
    if dedup:
        _retention(pmap, obs, r1, f)
    if "retention_ms" not in f:
        f["retention_ms"] = Finding("untested", "not observed (the key never replayed, or the wait step did not "
                                    "run); the service owner declares it", None)

    # -- reads: by key, by search, an unknown key, and freshness
    if pmap.service == "reservation":
        _reads(pmap, obs, r1, f, notes, dedup, distrust)
    # -- compensation
    if pmap.service == "reservation":
        done = [e for e in obs.releases.values()]
        odd = next((e for e in done if e.status not in REFUSALS), None)
        if not pmap.has("release"):
            f["compensation"] = Finding("untested", "no release request in the mapping file", None)
        elif any(e.ok for e in done):
            f["compensation"] = _released(pmap, obs, [e for e in done if e.ok])
        elif not done:
            f["compensation"] = Finding("untested", "no effect was made, so nothing was released", None)
        elif odd is None and distrust is None:
            f["compensation"] = Finding("observed", f"every release was refused ({_refusal(done[0])}): the service "
                                        "cannot compensate", False, _brief(*done[:2]))
        else:
            f["compensation"] = Finding("untested", _unclear(odd or done[0], "compensation", "the mapping file's "
                                        "requests.release, the URL and the credentials the endpoint wants",
                                        None if odd else distrust), None, _brief(*done[:2]))

    # -- an error answer under a key, then a good request under it
    err, after = obs.one("error"), obs.one("after_error")
    if err is None:
        f["error_replay"] = Finding("untested", "no 'failing' intent in the mapping file", None)
    elif not err.status or (after is not None and not after.status):
        f["error_replay"] = Finding("untested", "the failing request, or the good one after it, got no answer: "
                                    "only an answer shows what the key keeps", None, _brief(err, after))
    elif r1 is None:
        f["error_replay"] = Finding("untested", "the first request made no effect, so the same answer for the "
                                    "failing and the good intent cannot be told from a service that answers every "
                                    "request so", None, _brief(first, err, after))
    elif err.ok:
        f["error_replay"] = Finding("untested", "the failing intent was accepted (an effect, released); give "
                                    "'failing' fields the endpoint refuses", None, _brief(err))
    elif foreign(pmap, "error", "effect", err) or 300 <= err.status < 400:
        f["error_replay"] = Finding("untested", _unclear(err, "error_replay", "the URL, the credentials the endpoint "
                                    "wants and the mapping file's 'failing' fields"), None, _brief(err, after))
    elif after is not None and after.ok and ref_of(pmap, after) is not None:
        f["error_replay"] = Finding("observed", f"an error answer ({err.status}) was not stored under its key: the "
                                    "same key with a good intent made the effect", False, _brief(err, after))
    elif after is not None and (same_answer(after, err) or after.status in REFUSALS) and \
            (distrust is not None or (again is not None and r2 is None)):
        # the same refusal for the good intent shows a stored error only where the endpoint still took
        # the accepted intent: one that refuses every request after the first answers so too
        undermined = distrust or (again, "not the first request's answer again, nor a second effect")
        f["error_replay"] = Finding("untested", _unclear(after, "error_replay", "the URL and the credentials the "
                                    "endpoint wants", undermined), None, _brief(first, again, err, after))
    elif after is not None and same_answer(after, err):
        f["error_replay"] = Finding("observed", f"the error answer ({err.status} {err.code() or ''}) was replayed "
                                    "under its key: a retry after an error needs a new key, and a 5xx stored this "
                                    "way cannot be retried under the same key at all", True, _brief(err, after))
    elif after is not None and after.status in REFUSALS:
        f["error_replay"] = Finding("observed", f"after an error answer the same key with a good intent was refused "
                                    f"({after.status} {after.code() or ''}): the key stays bound to the failed "
                                    "request, so a retry after an error needs a new key", True, _brief(err, after))
    elif after is not None:
        f["error_replay"] = Finding("untested", _unclear(after, "error_replay", "the URL and the credentials the "
                                    "endpoint wants"), None, _brief(err, after))
    else:
        f["error_replay"] = Finding("untested", "the good request after the error was not sent", None, _brief(err))
    if f["error_replay"].value is True and (f.get("idempotency") and f["idempotency"].value == "none"):
        f["error_replay"].status = "untested"       # crashlab's services keep errors only with deduplication
        f["error_replay"].text += "; but with no deduplication the simulator cannot keep it, so it is not written"
    _contradicted(pmap, obs, f, notes)
    for name, text in UNTESTED.items():
        notes[name] = Finding("untested", text + "; the service owner declares it", None)
    return Profile(service=pmap.service, fields={k: v for k, v in f.items() if k in FIELDS[pmap.service]}, notes=notes)


def _released(pmap: ProbeMap, obs: Observed, done: list[Exchange]) -> Finding:
    """``compensation`` after a release succeeded: true only when the release of a reference never
    made (``unmade``) was refused, which shows the release reads its reference (contradict.py)."""
    unmade = obs.unmade
    refused = refuses_unmade(unmade)
    if refused is True:
        return Finding("observed", f"the release request released the probe's effects, and refused a reference "
                       f"never made ({_refusal(unmade)})", True, _brief(*done[:2], unmade))
    if refused is False:        # contradict.py leaves it untested, naming both answers
        return Finding("observed", "the release request released the probe's effects", True, _brief(*done[:2]))
    if unmade is None:
        return Finding("untested", f"{done[0].brief()} succeeded, but the release of a reference never made, which "
                       "shows that the release reads its reference, was not sent (the budget had no room left); "
                       "compensation is left for the service owner to declare: pass a larger --budget, and probe "
                       "again", None, _brief(*done[:2]))
    return Finding("untested", f"{done[0].brief()} succeeded, but " + _unclear(
        unmade, "compensation", "the mapping file's requests.release, the URL and the credentials the endpoint wants"),
        None, _brief(*done[:2], unmade))


def _contradicted(pmap: ProbeMap, obs: Observed, f: dict, notes: dict) -> None:
    """Leave untested every field and note that rests on answers that contradict each other
    (contradict.py): a plain contradiction (the endpoint ignores the request) all of them."""
    clashes = contradictions(pmap, obs)
    # each field takes the line of a contradiction about it, else of the first plain one
    for clash, names in [(c, c.fields) for c in clashes] + [(c, [*f, *notes]) for c in clashes if c.plain]:
        for name in names:
            found = f.get(name) or notes.get(name)
            if found is not None and found.status == "observed":
                seen = found.responses + [b for b in _brief(clash.earlier, clash.later) if b not in found.responses]
                found.status, found.value, found.responses = "untested", None, seen
                found.text = clash.line(name.removesuffix("_ms"))


def _retention(pmap: ProbeMap, obs: Observed, r1: str | None, f: dict) -> None:
    """Still replayed at the last try: at least that old (beyond it, untested). Forgotten: between
    the last replay's age (the value written: the pessimistic end) and the forgetting request's."""
    def age(step: str, end: int) -> int:    # ms from the first answer (start) / request (end)
        t0 = obs.times["first"][1 if end == 0 else 0]
        return max(0, int((obs.times[step][end] - t0) * 1000)) + end

    tried = [s for s in ("again", "midway", "later") if obs.one(s) is not None]
    last = tried[-1]
    if len(tried) < 2:
        return
    ex = obs.one(last)
    if _same(ref_of(pmap, ex), r1):
        f["retention_ms"] = Finding("untested", f"still replayed {age(last, 0)} ms after the first answer (the "
                                    f"probe's wait: {obs.wait_ms} ms); retention beyond it is the service owner's to "
                                    "declare (it must cover the longest retry and reconciliation horizon)", None,
                                    _brief(obs.one("first"), ex))
    elif ref_of(pmap, ex) is not None:
        lo, hi = age(tried[-2], 0), age(last, 1)
        f["retention_ms"] = Finding("observed", f"the key was forgotten: replayed {lo} ms after the first answer, "
                                    f"a second effect ({ref_of(pmap, ex)}) at most {hi} ms after it; the shorter "
                                    "bound is written (a shorter --wait narrows it). A key forgotten before the "
                                    "longest retry horizon makes a late resend a second effect", lo,
                                    _brief(obs.one("first"), obs.one(tried[-2]), ex))


def _reads(pmap: ProbeMap, obs: Observed, r1, f: dict, notes: dict, dedup, distrust) -> None:
    read, read_later, unknown = obs.one("read"), obs.one("read_later"), obs.one("unknown")
    search, search_later = obs.one("search"), obs.one("search_later")
    found_at = pmap.answers.get("found")

    def found(ex):
        return ex is not None and ex.ok and dig(ex.body, found_at) is True and \
            (pmap.answers.get("found_ref") is None or str(dig(ex.body, pmap.answers["found_ref"])) == r1)

    def says(ex, request):
        """True: the answer found (listed) the effect; False: it says the effect is not there (found
        false, a list without it, a 404 saying not found) or the service refuses the read (400: it
        offers no such read); None: it says neither (no answer, 5xx, 429, or any other refusal)."""
        if request == "lookup" and ex.ok and isinstance(dig(ex.body, found_at), bool):
            return found(ex)
        if request == "search" and ex.ok and isinstance(dig(ex.body, pmap.answers.get("records")), list):
            return r1 in listed(pmap, ex)
        if distrust is None and (ex.status == 400 or (ex.status == 404 and _negative(pmap, request, ex))):
            return False
        return None

    def decide(now, later, request):
        """(True | False | "unclear" | None (not tried), the answer that decided or left it unclear)."""
        if now is None or r1 is None:
            return None, None
        a = says(now, request)
        b = says(later, request) if later is not None else False
        if a is True or b is True:
            return True, now if a is True else later
        if a is False and b is False:
            return False, now
        return "unclear", now if a is None else later

    def missed(ex, what):
        return (f"the {what} did not find the effect" if ex.ok else f"the {what} answered not found (404)"
                if ex.status == 404 else f"the {what} was refused ({_refusal(ex)})")

    by_key, key_ex = decide(read, read_later, "lookup")
    by_search, search_ex = decide(search, search_later, "search")
    unclear = next((ex for v, ex in ((by_key, key_ex), (by_search, search_ex)) if v == "unclear"), None)
    fresh = None                         # read-your-write at once?
    if by_key is True:
        fresh = found(read)
    if by_search is True and fresh is None:
        fresh = r1 in listed(pmap, search)
    if by_key is True:
        value, why = "by_key", f"the read by key found the effect ({r1}): " + MEANING["by_key"]
    elif unclear is not None:
        value, why = None, _unclear(unclear, "lookup", "the mapping file's requests.lookup and requests.search, the "
                                    "URL and the credentials the endpoint wants", distrust if unclear.status in
                                    (400, 404) else None)
    elif by_search is True:
        value, why = "by_incident_slot", (f"the search listed the effect ({r1})" + (f"; {missed(key_ex, 'read by key')}"
                                          if by_key is False else "; no read by key is mapped") + ": "
                                          + MEANING["by_incident_slot"])
    elif by_key is False and by_search is None and search is None:
        value, why = "none", (f"{missed(key_ex, 'read by key')}, and no search is mapped: " + MEANING["lookup_none"])
    elif by_key is False or by_search is False:
        value, why = "none", ("neither the read by key nor the search found the effect ("
                              + "; ".join(missed(ex, what) for v, ex, what in ((by_key, key_ex, "read by key"),
                                                                              (by_search, search_ex, "search"))
                                          if v is False) + "): " + MEANING["lookup_none"])
    else:
        value, why = None, "no read request is mapped, or no effect was made"
    if value == "by_key" and f.get("idempotency") and f["idempotency"].value == "none":
        value = "by_incident_slot" if by_search is True else "none"
        why += (f"; but crashlab's services keep no key index without deduplication, so the profile says {value} "
                "(a read by key without deduplication cannot be simulated)")
    f["lookup"] = Finding("observed" if value else "untested", why, value,
                          _brief(read, read_later, search, search_later))
    if unknown is not None and not unknown.status:
        notes["unknown_key"] = Finding("untested", f"a key never sent got {unknown.brief()}", None, _brief(unknown))
    elif unknown is not None:
        said_found = dig(unknown.body, found_at) if unknown.ok else None
        if said_found is False or (distrust is None and unknown.status == 404 and _negative(pmap, "lookup", unknown)):
            notes["unknown_key"] = Finding("observed", "a key never sent was reported not found: an honest negative",
                                           True, _brief(unknown))
        elif said_found is True:
            notes["unknown_key"] = Finding("observed", "a key never sent was reported FOUND: the read is not an "
                                           "authoritative negative; never treat it as absence", False, _brief(unknown))
        elif distrust is None and unknown.status == 400:
            notes["unknown_key"] = Finding("observed", f"a key never sent: the read was refused ({_refusal(unknown)})"
                                           ": no usable negative", False, _brief(unknown))
        else:
            notes["unknown_key"] = Finding("untested", _unclear(unknown, "whether the read gives an honest negative",
                                           "the mapping file's requests.lookup, the URL and the credentials the "
                                           "endpoint wants", distrust if unknown.status in (400, 404) else None),
                                           None, _brief(unknown))
    for ex, what in ((read, "in_flight"), (read, "as_of")):
        at = pmap.answers.get(what)
        if ex is not None and ex.ok and at:
            seen = dig(ex.body, at)
            notes[what] = Finding("observed" if seen is not None else "untested",
                                  f"the read reports {what} ({seen!r})" if seen is not None else
                                  f"the read's answer has no {at}", seen, _brief(ex))
    if fresh is True:
        f["consistency"] = Finding("observed", "the effect was readable at once (read-your-write); a read lag "
                                   "under other load is untested", "strong", _brief(read or search))
    elif fresh is False:
        lag = int(((obs.times.get("read_later") or obs.times.get("search_later"))[1] - obs.times["first"][0]) * 1000) + 1
        f["consistency"] = Finding("observed", f"the effect was missing from the first read and present after the "
                                   f"wait: eventual, with a lag of at most {lag} ms (the value written)", "eventual",
                                   _brief(read, read_later, search, search_later))
        f["lag_ms"] = Finding("observed", f"at most {lag} ms", lag, [])
    else:
        f["consistency"] = Finding("untested", "no read found the effect; read lag is the owner's to declare", None)


def conflicts(profile: Profile) -> list[str]:
    return [why for _, why in profile_conflicts(profile.service, profile.services())]

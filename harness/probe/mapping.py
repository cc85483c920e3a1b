"""The probe's mapping file: where each request goes on the endpoint, where the key goes, the
intent it sends (marked with the probe's own ``{probe}`` id) and where an answer names what the
probe needs. Read with crashlab's YAML reader: every error names the file, the line and the field.

    service: reservation                 # the crashlab service this endpoint plays
    endpoint: sandbox                    # test | sandbox (required for a host other than loopback)
    key: {header: Idempotency-Key}       # or {field: NAME}: a field of the JSON body
    requests:
      effect:  {method: POST, path: /reservation/reserve, body: {intent: "{intent}"}}
      lookup:  {method: GET, path: "/reservation/lookup?key={key}"}
      search:  {method: GET, path: "/reservation/search?incident={intent.incident}&slot={intent.slot}"}
      release: {method: POST, path: /reservation/release, body: {ref: "{ref}"}}
    intent: {tenant: "{probe}", incident: "{probe}", part: P-1, slot: S-1, quantity: 1}
    changed: {quantity: 2}               # the other payload sent under a used key
    failing: {principal: denied}         # optional: an intent the endpoint answers with an error
    answers: {ref: ref, replayed: replayed, found: found, found_ref: record.ref, records: records,
              record_ref: ref}

Placeholders: ``{probe}`` (this probe's id, ``crashlab-probe-`` and 8 hex digits), ``{key}``,
``{ref}``, ``{intent}`` (the whole intent object, when it is the whole string) and
``{intent.FIELD}``. In a path they are URL-encoded.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..vocab.errors import InvalidScenario
from ..scenario.yaml import _choice, _plain, _plain_mapping, _Reader, _string, parse_yaml

SERVICES = ("reservation", "notification")
ENDPOINTS = ("test", "sandbox")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
REQUESTS = ("effect", "lookup", "search", "release")
TOP_FIELDS = frozenset({"service", "endpoint", "key", "requests", "intent", "changed", "failing", "answers"})
ANSWERS = {
    "ref": "where an effect's answer names its reference (a dotted path, e.g. ref or data.id; a|b: either)",
    "replayed": "a field of an effect's answer that marks a replay (true)",
    "replayed_header": "a response header that marks a replay (any value but false)",
    "found": "a lookup answer's field saying whether the key was found",
    "found_ref": "the reference in a lookup answer",
    "in_flight": "a lookup answer's field saying a request with the key is still executing",
    "as_of": "a read answer's field saying how fresh it is",
    "records": "the list of records in a search answer",
    "record_ref": "the reference of one record in that list",
}
#: what each request needs among its placeholders, and among the answers
NEEDS = {"lookup": ("{key}", ("found",)), "search": (None, ("records", "record_ref")),
         "release": ("{ref}", ()), "effect": (None, ("ref",))}
_PLACEHOLDER = re.compile(r"\{([a-z_]+(?:\.[A-Za-z0-9_]+)?)\}")


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    method: str
    path: str
    body: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ProbeMap:
    file: str
    service: str
    endpoint: str | None
    key_header: str | None
    key_field: str | None
    requests: Mapping[str, Request]
    intent: Mapping[str, Any]
    changed: Mapping[str, Any]
    failing: Mapping[str, Any] | None
    answers: Mapping[str, str]

    def has(self, name: str) -> bool:
        return name in self.requests


def _placeholders(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(_PLACEHOLDER.findall(value))
    if isinstance(value, dict):
        return set().union(*(_placeholders(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_placeholders(v) for v in value)) if value else set()
    return set()


def load_map(path: str | Path) -> ProbeMap:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidScenario("no such mapping file; check the path (examples/probe/sandbox-map.yaml is one "
                              "for the sandbox)", file=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidScenario(f"cannot read the mapping file: {exc}", file=str(p)) from None
    return from_doc(parse_yaml(text, file=str(p)), file=str(p))


def from_doc(doc: Any, *, file: str) -> ProbeMap:
    rd = _Reader(file)
    if not isinstance(doc, dict):
        raise InvalidScenario("a mapping file is a YAML mapping (service, key, requests, intent, changed, answers; "
                              "docs/probe.md)", file=file, line=1)
    rd.mapping({"": doc}, "", "", TOP_FIELDS)
    service = rd.get(doc, "service", "", _choice(SERVICES, "service"))
    endpoint = rd.get(doc, "endpoint", "", _choice(ENDPOINTS, "endpoint (a probe runs only against a test or "
                                                   "sandbox endpoint)"), None)
    key = rd.mapping(doc, "key", "key", frozenset({"header", "field"})) if "key" in doc else \
        rd.fail(doc, "key", "key", "required field is missing; say where the key goes: key: {header: Idempotency-Key} "
                "or key: {field: idempotency_key}")
    if len(key) != 1:
        rd.fail(doc, "key", "key", "name exactly one of header or field")
    header, field = rd.get(key, "header", "key", _string, None), rd.get(key, "field", "key", _string, None)

    req_doc = rd.mapping(doc, "requests", "requests", frozenset(REQUESTS)) if "requests" in doc else \
        rd.fail(doc, "requests", "requests", "required field is missing; map at least the effect request")
    if "effect" not in req_doc:
        rd.fail(doc, "requests", "requests.effect", "the effect request (the keyed write) is required")
    intent = rd.get(doc, "intent", "", _plain_mapping)
    if not intent:
        rd.fail(doc, "intent", "intent", "the intent is empty; give the fields the effect request sends")
    if not any("probe" in _placeholders(v) for v in intent.values()):
        rd.fail(doc, "intent", "intent", "mark the intent: put \"{probe}\" in one of its fields (e.g. tenant: "
                "\"{probe}\") so every effect the probe creates names the probe")
    changed = rd.get(doc, "changed", "", _plain_mapping)
    if not changed or all(intent.get(k) == v for k, v in changed.items()):
        rd.fail(doc, "changed", "changed", "give at least one field whose value differs from the intent's "
                "(e.g. quantity: 2): the other payload sent under a used key")
    failing = rd.get(doc, "failing", "", _plain_mapping, None)
    if failing is not None and not failing:
        rd.fail(doc, "failing", "failing", "give the fields that make the endpoint answer with an error, or "
                "remove the line")

    ans_doc = rd.mapping(doc, "answers", "answers", frozenset(ANSWERS)) if "answers" in doc else \
        rd.fail(doc, "answers", "answers", "required field is missing; say at least where an effect's answer names "
                "its reference: answers: {ref: ref}")
    answers = {k: rd.get(ans_doc, k, "answers", _string) for k in ans_doc}

    known = {"probe", "key", "ref", "intent"} | {f"intent.{k}" for k in intent}
    requests: dict[str, Request] = {}
    for name in req_doc:
        rpath = f"requests.{name}"
        r = rd.mapping(req_doc, name, rpath, frozenset({"method", "path", "body"}))
        method = rd.get(r, "method", rpath, lambda v: _choice(METHODS, "method")(str(v).upper()), "POST"
                        if name in ("effect", "release") else "GET")
        route = rd.get(r, "path", rpath, _path)
        body = rd.get(r, "body", rpath, _plain_mapping, None)
        if body is not None and method == "GET":
            rd.fail(r, "body", f"{rpath}.body", "a GET request has no body; put its values in the path's query")
        unknown = sorted((_placeholders(route) | _placeholders(body)) - known)
        if unknown:
            rd.fail(r, "path" if unknown[0] in _placeholders(route) else "body", rpath,
                    f"unknown placeholder {{{unknown[0]}}}; use {', '.join('{' + k + '}' for k in sorted(known))}")
        need, answer_needs = NEEDS[name]
        if need and need[1:-1] not in _placeholders(route) | _placeholders(body):
            rd.fail(req_doc, name, rpath, f"the {name} request must carry {need} (in its path or body)")
        for a in answer_needs:
            if a not in answers:
                rd.fail(doc, "answers", f"answers.{a}", f"the {name} request needs answers.{a}: {ANSWERS[a]}")
        if name in ("effect",) and field is not None and method == "GET":
            rd.fail(r, "method", f"{rpath}.method", "key: {field: ...} puts the key in the body; a GET has none")
        requests[name] = Request(name, method, route, body)
    return ProbeMap(file=file, service=service, endpoint=endpoint, key_header=header, key_field=field,
                    requests=requests, intent=_plain(intent), changed=_plain(changed),
                    failing=_plain(failing) if failing is not None else None, answers=answers)


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError(f"expected a path starting with '/', relative to the probed URL, got {value!r}")
    if any(c.isspace() for c in value):
        raise ValueError(f"a path has no spaces; got {value!r}")
    return value


def dig(value: Any, dotted: str) -> Any:
    """``answers`` paths: ``record.ref`` reads value["record"]["ref"]; a missing step is None;
    ``message_id|ref``: the first of the alternatives the answer has."""
    if "|" in dotted:
        for alt in dotted.split("|"):
            found = dig(value, alt)
            if found is not None:
                return found
        return None
    for part in dotted.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value

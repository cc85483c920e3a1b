"""Documents generated from the scenario format's own tables: the JSON Schema shipped in
harness/data/scenario.schema.json (an editor completes and checks a file with it) and the
library table docs/scenarios.md embeds. tools/docgen.py writes and checks both.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..vocab.model import EFFECT_OPS, ERROR_CODES, PLATFORM_PORTS, RUBRIC_POINT_IDS, SERVICE_OPS
from ..vocab.compiled import Scenario
from .format import (APPROVAL_MODES, BOUNDARIES, CANCEL_RECORDS, CARD_FIELDS, COMPENSATION_AUTHORITY, DEFAULT_ENV,
                     DEPLOY_ALTERS, DISPOSITIONS, EVENT_FIELDS, EVENT_TYPES, EXPECT_FIELDS, EXPECT_RULE_FIELDS,
                     FAULTS, HISTORY_FIELDS, ID_PATTERN, INVARIANT_PATTERN, KNOWLEDGE, PRIMARY_OPERATION,
                     PROFILE_CHOICES, RESERVED_PAYLOAD_KEYS, RULE_FIELDS, RUN_STATES, RUNLESS_EVENTS, SEED_MAX,
                     TAG_PATTERN, TRACE_KINDS, VERDICTS, CLOCK_RATE_RANGE)
from .loader import library
from ..world.services import PROFILE_DEFAULTS, PROFILE_OPTIONAL
from ..vocab.timefmt import CLOCK_PATTERN

# --------------------------------------------------------------------------- JSON Schema
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "data" / "scenario.schema.json"



def _combined(items: list[str]) -> str:
    """The pattern of an evidence item with operators: items joined by '|' or '&', each maybe '!'."""
    atom = "!?(?:" + "|".join(re.escape(x) for x in sorted(items, key=len, reverse=True)) + ")"
    return f"^(?:{atom}(?:[|&]{atom})+|!{atom[2:]})$"

def _joined(items: list[str]) -> str:
    """The pattern of an expect.absent conjunction: items joined by '&'."""
    atom = "(?:" + "|".join(re.escape(x) for x in sorted(items, key=len, reverse=True)) + ")"
    return f"^{atom}(?:&{atom})+$"


def schema_document() -> dict:
    """The scenario format as a JSON Schema (draft 2020-12), built from the loader's own tables.

    It covers names, types, enumerations and patterns, so an editor can complete and check
    a file as it is typed. Rules that relate fields to each other (a run named by an event
    exists, a deadline comes after the start, an event fires before the horizon) are the
    loader's alone."""
    ports = {**PLATFORM_PORTS, **SERVICE_OPS}
    all_ops = sorted(frozenset().union(*ports.values()))
    duration = {"oneOf": [{"type": "integer", "minimum": 0},
                          {"type": "string", "pattern": r"^(?:\d+|(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+)$"}],
                "description": "milliseconds, or '1500ms', '90s', '2m', '1m30s', '24h', '7d'"}
    clock = {"type": "string", "pattern": CLOCK_PATTERN, "description": "a clock time: '10:02', '10:02:30.250'"}
    time = {"oneOf": [clock, duration], "description": "a clock time ('10:02') or a duration after the origin"}
    text = {"type": "string", "minLength": 1, "pattern": r"\S"}
    ident = {"type": "string", "pattern": ID_PATTERN}

    def obj(properties: dict, required: tuple = (), **extra) -> dict:
        return {"type": "object", "properties": properties, "required": sorted(required),
                "additionalProperties": False, **extra}

    def knob(kind: str, name: str, default: Any) -> dict:
        if name.endswith("_ms"):
            return {"oneOf": [duration, {"type": "null"}]} if default is None else duration
        if name in PROFILE_CHOICES[kind]:
            return {"enum": list(PROFILE_CHOICES[kind][name])}
        if isinstance(default, bool):
            return {"type": "boolean"}
        if isinstance(default, int):
            return {"type": "integer", "minimum": 0}
        if isinstance(default, list):
            return {"type": "array", "items": text}
        return text

    services = {}
    for kind, defaults in PROFILE_DEFAULTS.items():
        props = {}
        for name, default in {**defaults, **PROFILE_OPTIONAL.get(kind, {})}.items():
            props[name] = knob(kind, name, default)
            if name.endswith("_ms"):
                props[name[:-3]] = props[name]
        services[kind] = {"oneOf": [obj(props), {"type": "null"}]}

    approval = obj({"mode": {"enum": list(APPROVAL_MODES)}, "delay": duration, "expires_after": duration})
    run = obj({"id": ident, "intent": {"type": "object", "minProperties": 1},
               "service": {"enum": sorted(PROFILE_DEFAULTS)},
               "operation": {"enum": sorted(set(PRIMARY_OPERATION.values()))},
               "start": time, "deadline": time, "approval": approval,
               "compensation_authority": {"enum": list(COMPENSATION_AUTHORITY)},
               "history": {"type": "object", "additionalProperties": False,
                           "properties": {k: {"type": "integer", "minimum": 0} for k in HISTORY_FIELDS},
                           "description": "a run that arrives with earlier history: the checkpoint version "
                                          "its store stands at and the lease epochs already used"},
               "notify": {"type": "boolean"}}, ("intent",))

    event_props = {"at": time, "type": {"enum": sorted(EVENT_TYPES)}, "run": ident, "reason": text,
                   "payload": {"type": "object", "propertyNames": {"not": {"enum": sorted(RESERVED_PAYLOAD_KEYS)}}},
                   "duplicates": {"type": "integer", "minimum": 0}, "duplicate_after": duration,
                   "event_id": text, "producer_seq": {"type": "integer", "minimum": 0}, "producer": text,
                   "kind": {"type": "string", "pattern": r"^[a-z][a-z0-9_]*$"},
                   "service": {"enum": sorted(PROFILE_DEFAULTS)},
                   "op": {"enum": sorted(frozenset().union(*EFFECT_OPS.values()))},
                   "args": {"type": "object"},
                   "same_key": {"type": "boolean", "description": "other_actor: reuse the key of the call the "
                                "event is anchored to"},
                   "services": {"type": "object", "description": "deploy: a service-contract change, "
                                "{kind: {retention, lookup, consistency, lag, max_delivery_delay}}"},
                   "record": {"enum": list(CANCEL_RECORDS), "description": "cancel: the platform also records "
                              "the cancellation as the run's next checkpoint version (it wins the version race)"},
                   "alters": {"type": "array", "items": {"enum": sorted(DEPLOY_ALTERS)}, "description":
                              "deploy: what the code change alters; each needs its contract version changed"},
                   **{k: {"type": "integer", "minimum": 1} for k in DEFAULT_ENV}}
    per_type = []
    for etype in sorted(EVENT_TYPES):
        names = sorted(EVENT_FIELDS[etype] | {"at", "type"} | (set() if etype in RUNLESS_EVENTS else {"run"}))
        then: dict = {"propertyNames": {"enum": names}}
        if etype == "event":
            then["required"] = ["kind"]
        if etype == "deploy":
            then["minProperties"] = 3
        per_type.append({"if": {"properties": {"type": {"const": etype}}, "required": ["type"]},
                         "then": then})
    event = {"type": "object", "properties": event_props, "required": ["at", "type"],
             "additionalProperties": False, "allOf": per_type}

    match = obj({"port": {"enum": sorted(ports)}, "op": {"enum": all_ops},
                 "nth": {"type": "integer", "minimum": 1}, "worker": {"type": "integer", "minimum": 1},
                 "run": ident, "from": time, "until": time, "knowledge": {"enum": sorted(KNOWLEDGE)},
                 "state": {"enum": sorted(RUN_STATES)}, "appends": {"enum": sorted(KNOWLEDGE)},
                 "disposition": {"enum": sorted(RUN_STATES)}},
                minProperties=1)
    anchor = {"type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 2,
              "properties": {"before": match, "after": match, "delay": duration},
              "oneOf": [{"required": ["before"]}, {"required": ["after"]}],
              "description": "an event anchored to a port call: delivered when the matching call happens "
                             "(before it executes, or after it completes), plus delay"}
    event_props["at"] = {"oneOf": [time, anchor]}
    rule_props = {"match": match, "fault": {"enum": sorted(FAULTS)}, "code": {"enum": sorted(ERROR_CODES)},
                  "delay": duration, "times": {"type": "integer", "minimum": 0},
                  "boundary": {"enum": list(BOUNDARIES)}, "restart_after": duration, "resume_after": duration}

    def rules(section: str) -> dict:
        item = obj({k: rule_props[k] for k in sorted(RULE_FIELDS[section])},
                   ("match", "fault") if section == "faults" else ("match",))
        if section == "faults":
            item["allOf"] = [{"if": {"properties": {"fault": {"const": "error"}}, "required": ["fault"]},
                              "then": {"required": ["code"]}},
                             {"if": {"required": ["code"]},
                              "then": {"properties": {"fault": {"enum": ["error", "unavailable"]}}}}]
        return {"type": "array", "items": item}

    calls = [f"{p}.{o}" for p in sorted(ports) for o in sorted(ports[p])]
    evidence = {"enum": sorted(calls + [f"ledger:{k}" for k in KNOWLEDGE]
                               + [f"{p}:{d}" for p in ("checkpoint", "finish") for d in DISPOSITIONS]
                               + list(TRACE_KINDS))}
    count = {"type": "integer", "minimum": 0}
    remote_effects = {"oneOf": [count, {"type": "object", "minProperties": 1,
                                        "propertyNames": {"pattern": ID_PATTERN},
                                        "additionalProperties": count}],
                      "description": "an exact total, {min, max}, or a count per run id"}
    disposition_list = {"type": "array", "minItems": 1, "items": {"enum": sorted(DISPOSITIONS)}}
    expect = obj({"dispositions": {"oneOf": [disposition_list, {
                      "type": "object", "minProperties": 1, "propertyNames": {"pattern": ID_PATTERN},
                      "additionalProperties": disposition_list}],
                      "description": "one list for every run, or a list per run id"},
                  "remote_effects": remote_effects,
                  "evidence": {"type": "array", "items": {"anyOf": [evidence, {
                      "type": "string", "pattern": _combined(evidence["enum"]),
                      "description": "'a|b': any one of the alternatives; 'a&b': both parts; '!a': a never occurs"}]}},
                  "absent": {"type": "array", "items": {"anyOf": [evidence, {
                      "type": "string", "pattern": _joined(evidence["enum"]),
                      "description": "'a&b': both parts together (either alone is allowed)"}]}},
                  "disposition_at": obj({"at": time, "dispositions": {"type": "array", "minItems": 1,
                                                                      "items": {"enum": sorted(DISPOSITIONS)}}}),
                  "violations": {"type": "array", "items": {"type": "string", "pattern": INVARIANT_PATTERN}},
                  "verdict": {"enum": list(VERDICTS)}})
    rule = obj({"point": {"enum": list(RUBRIC_POINT_IDS)}, "source": text, "quote": text}, EXPECT_RULE_FIELDS)
    expect["properties"]["rules"] = obj({k: rule for k in sorted(EXPECT_FIELDS - {"rules"})})
    top = {
        "id": ident, "title": text, "description": text,
        "tags": {"type": "array", "uniqueItems": True, "items": {"type": "string", "pattern": TAG_PATTERN}},
        "card": obj({k: text for k in CARD_FIELDS}),
        "seed": {"type": "integer", "minimum": 0, "maximum": SEED_MAX},
        "clock": obj({"origin": clock, "horizon": time}),
        "services": obj(services, minProperties=1),
        "runs": {"type": "array", "minItems": 1, "items": run},
        "events": {"type": "array", "items": event},
        "faults": rules("faults"), "crashes": rules("crashes"), "pauses": rules("pauses"),
        "expect": expect,
        "env": obj({k: {"type": "integer", "minimum": 1} for k in DEFAULT_ENV}),
        "worker_clocks": {"type": "array", "description": "crashlab integrate only: a real worker's wall clock, "
                          "off by offset (scenario time, - behind) and running at rate times real speed",
                          "items": obj({"worker": {"type": "integer", "minimum": 1}, "run": ident,
                                        "offset": {"oneOf": [{"type": "integer"},
                                                             {"type": "string", "pattern": r"^[+-]?\S+$"}]},
                                        "rate": {"type": "number", "minimum": CLOCK_RATE_RANGE[0],
                                                 "maximum": CLOCK_RATE_RANGE[1]}}, ("worker",),
                                       minProperties=2)},
    }
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "crashlab scenario",
            "description": "A crashlab scenario file (docs/scenarios.md). Generated by "
                           "crashlab.scenario.schema_document(); do not edit by hand.",
            **obj(top, ("id", "title", "runs"))}


def schema_text() -> str:
    return json.dumps(schema_document(), indent=2, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- library table
TABLE_BEGIN, TABLE_END = "<!-- library:begin -->", "<!-- library:end -->"


def library_table(scenarios: list[Scenario] | None = None) -> str:
    """The Markdown table of the library (id, title, tags) that docs/scenarios.md embeds."""
    rows = ["| id | title | tags |", "|---|---|---|"]
    for sc in library() if scenarios is None else scenarios:
        title = sc.title.replace("|", "\\|")
        rows.append(f"| `{sc.id}` | {title} | {', '.join(sc.tags)} |")
    return "\n".join(rows) + "\n"

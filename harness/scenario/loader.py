"""The scenario loader: a YAML file, a document or a library id in, a compiled Scenario out.

Every section is checked against the format's tables (scenario_format), times and durations
are read on the scenario's own clock (timefmt), and every error names the file, the line and
the field and says what to do. The shipped library and id look-up live here too.
"""
from __future__ import annotations

import difflib
import re
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

from ..vocab.errors import InvalidScenario
from ..vocab.model import EFFECT_OPS, ERROR_CODES, PLATFORM_PORTS, RUBRIC_POINT_IDS, SERVICE_OPS
from ..vocab.compiled import Match, Rule, RunSpec, Scenario, WorldEvent
from .format import (ANCHORS, APPROVAL_MODES, BOUNDARIES, CANCEL_RECORDS, CARD_FIELDS, COMPENSATION_AUTHORITY,
                     CONTRACT_KNOBS, DEFAULT_ENV, DEFAULT_HORIZON_MS, DEFAULT_ORIGIN_MS, DEPLOY_ALTERS, DISPOSITIONS,
                     EVENT_FIELDS, EVENT_TYPES, EVIDENCE_FORMS, EXPECT_FIELDS, EXPECT_RULE_FIELDS, FAULTS,
                     HISTORY_FIELDS, ID_PATTERN, INVARIANT_PATTERN, KNOWLEDGE, MATCH_FIELDS, PRIMARY_OPERATION,
                     PROFILE_CHOICES, READ_FAULTS, RESERVED_PAYLOAD_KEYS, RULE_ACTION, RULE_FIELDS, RUN_FIELDS,
                     RUN_STATES, RUNLESS_EVENTS, SEED_MAX, TAG_PATTERN, TOP_FIELDS, TRACE_KINDS, TRANSPORT_FAULTS,
                     VERDICTS)
from .yaml import (_boolean, _choice, _integer, _join, _line, _must, _parse, _pattern, _plain, _plain_mapping,
                   _Reader, _string, _string_list)
from ..world.services import PROFILE_DEFAULTS, PROFILE_OPTIONAL, malformed_request, profile_conflicts
from ..vocab.timefmt import CLOCK_HINT, clock_ms, format_time, parse_duration, parse_time
from .evidence import _EVIDENCE, _absent_item, _evidence, _evidence_any  # noqa: F401 (moved there)
from .worker_clocks import read_worker_clocks


def _seed_value(value: Any) -> int:
    value = _integer(0)(value)
    if value > SEED_MAX:
        raise ValueError(f"a seed is at most 2**53 - 1 ({SEED_MAX}), got {value}")
    return value


# --------------------------------------------------------------------------- the loader
def from_dict(doc: Any, *, file: str | None = None) -> Scenario:
    """Validate and compile a scenario document (a dict as YAML would give it)."""
    rd = _Reader(file)
    if not isinstance(doc, dict):
        raise InvalidScenario("a scenario must be a YAML mapping at the top level (id, title, runs, ...)"
                              if doc is not None else "the scenario file is empty; start with id, title and runs",
                              file=file, line=1)
    root = {"": doc}
    rd.mapping(root, "", "", TOP_FIELDS)
    sid = rd.get(doc, "id", "", _pattern(ID_PATTERN, "id: use lower-case letters, digits, '.', '_' or '-' "
                                         "(at most 80), starting with a letter or digit"))
    title = rd.get(doc, "title", "", _string)
    rd.get(doc, "description", "", _string, None)
    tags_doc = rd.items(doc, "tags", "tags")
    tags = tuple(rd.get(tags_doc, i, "tags", _pattern(TAG_PATTERN, "tag: write one line of text"))
                 for i in range(len(tags_doc)))
    if len(set(tags)) != len(tags):
        rd.fail(doc, "tags", "tags", "a tag is listed twice; list each tag once")
    card = {}
    if "card" in doc:
        card_doc = rd.mapping(doc, "card", "card", frozenset(CARD_FIELDS))
        card = {k: rd.get(card_doc, k, "card", _string) for k in CARD_FIELDS if k in card_doc}
    seed = rd.get(doc, "seed", "", _seed_value, 1)

    clock = rd.mapping(doc, "clock", "clock", frozenset({"origin", "horizon"})) if "clock" in doc else {}
    origin = rd.get(clock, "origin", "clock", lambda v: _must(
        clock_ms(v) if isinstance(v, str) else None, f"expected a clock time, got {v!r}; {CLOCK_HINT}"),
        DEFAULT_ORIGIN_MS)
    at = lambda v: parse_time(v, origin)  # noqa: E731
    horizon = rd.get(clock, "horizon", "clock", at, DEFAULT_HORIZON_MS)
    if horizon <= 0:
        rd.fail(clock, "horizon", "clock.horizon", "the horizon must come after the origin")

    services = _read_services(rd, doc)
    runs = _read_runs(rd, doc, services, at, origin, horizon)
    run_ids = [r.id for r in runs]
    events = _read_events(rd, doc, services, run_ids, at, origin, horizon)
    rules = _read_rules(rd, doc, services, run_ids, at)
    expect = _read_expect(rd, doc, services, run_ids, at)
    env = dict(DEFAULT_ENV)
    if "env" in doc:
        env_doc = rd.mapping(doc, "env", "env", frozenset(DEFAULT_ENV))
        env.update({k: rd.get(env_doc, k, "env", _integer(1)) for k in env_doc})
    return Scenario(id=sid, title=title, tags=tags, card=card, seed=seed, origin_ms=origin,
                    horizon_ms=horizon, services=services, runs=runs, events=events, rules=rules,
                    expect=expect, env=env, source=file, raw=_plain(doc),
                    worker_clocks=read_worker_clocks(rd, doc, run_ids))


def _read_services(rd: _Reader, doc: dict) -> dict[str, dict]:
    if "services" not in doc:
        return {"reservation": dict(PROFILE_DEFAULTS["reservation"])}
    services_doc = rd.mapping(doc, "services", "services", frozenset(PROFILE_DEFAULTS),
                              hint="each key is a service kind")
    if not services_doc:
        rd.fail(doc, "services", "services", "declare at least one service (reservation, notification, registry)")
    services: dict[str, dict] = {}
    for name in services_doc:
        path = f"services.{name}"
        merged = dict(PROFILE_DEFAULTS[name])
        defaults = {**merged, **PROFILE_OPTIONAL.get(name, {})}    # an optional knob only when declared
        # knobs ending in _ms are written without the suffix (retention: 30m)
        spelled = {k[:-3] if k.endswith("_ms") else k: k for k in defaults}
        prof = rd.mapping(services_doc, name, path, frozenset(spelled) | frozenset(defaults), nullable=True)
        for key in prof:
            target = spelled.get(key, key)
            if target != key and target in prof:
                rd.fail(prof, key, _join(path, key), f"'{key}' and '{target}' are the same knob; keep one")
            default = defaults[target]
            if target.endswith("_ms"):
                merged[target] = rd.get(prof, key, path, parse_duration, nullable=default is None)
            elif key in PROFILE_CHOICES[name]:
                merged[target] = rd.get(prof, key, path, _choice(PROFILE_CHOICES[name][key], key))
            elif isinstance(default, bool):
                merged[target] = rd.get(prof, key, path, _boolean)
            elif isinstance(default, int):
                merged[target] = rd.get(prof, key, path, _integer(0))
            elif isinstance(default, list):
                merged[target] = rd.get(prof, key, path, _string_list)
            else:
                merged[target] = rd.get(prof, key, path, _string)
        for knob, why in profile_conflicts(name, merged):
            rd.fail(prof, knob if knob in prof else next(iter(prof)), _join(path, knob), why)
        if merged.get("consistency") == "strong" and merged.get("lag_ms"):
            rd.fail(prof, "lag", f"{path}.lag", "a lag needs consistency: eventual; set it or drop the lag")
        services[name] = merged
    return services


def read_services(doc: dict, *, file: str | None = None) -> dict[str, dict]:
    """A ``services:`` section on its own (a services profile, ``--services``), checked as a
    scenario's is: errors name the file, the line and the field."""
    return _read_services(_Reader(file), doc)


def _read_runs(rd: _Reader, doc: dict, services: dict, at, origin: int, horizon: int) -> tuple[RunSpec, ...]:
    runs_doc = rd.get(doc, "runs", "", lambda v: v)
    if not isinstance(runs_doc, list) or not runs_doc:
        rd.fail(doc, "runs", "runs", "a scenario needs a list of at least one run (id, intent)")
    runs: list[RunSpec] = []
    for i in range(len(runs_doc)):
        path = f"runs[{i}]"
        r = rd.mapping(runs_doc, i, path, RUN_FIELDS)
        rid = rd.get(r, "id", path, _pattern(ID_PATTERN, "run id"), f"run-{i + 1}")
        if rid in [x.id for x in runs]:
            rd.fail(r, "id", f"{path}.id", f"run id {rid!r} is used twice; give each run its own id")
        service = rd.get(r, "service", path, _choice(sorted(services), "service (declare it under services)"),
                         "reservation" if "reservation" in services else sorted(services)[0])
        operation = rd.get(r, "operation", path, _choice({PRIMARY_OPERATION[service]},
                                                         f"effect for a {service} run"),
                           PRIMARY_OPERATION[service])
        intent = rd.get(r, "intent", path, _plain_mapping)
        if not intent:
            rd.fail(r, "intent", f"{path}.intent", "the intent is empty; give the business fields "
                    "(tenant, incident, part, slot, technician, quantity, principal)")
        start = rd.get(r, "start", path, at, 0)
        if start >= horizon:
            rd.fail(r, "start", f"{path}.start", "the run starts at or after the horizon "
                    f"{format_time(horizon, origin)}; start it earlier or extend clock.horizon")
        deadline = rd.get(r, "deadline", path, at, None)
        if deadline is not None and deadline <= start:
            rd.fail(r, "deadline", f"{path}.deadline", "the deadline must come after the run's start")
        approval = {"mode": "auto", "delay_ms": 60_000, "expires_after_ms": 3_600_000}
        if "approval" in r:
            ap = rd.mapping(r, "approval", f"{path}.approval", frozenset({"mode", "delay", "expires_after"}))
            approval = {"mode": rd.get(ap, "mode", f"{path}.approval", _choice(APPROVAL_MODES, "approval mode"),
                                       "auto"),
                        "delay_ms": rd.get(ap, "delay", f"{path}.approval", parse_duration, 60_000),
                        "expires_after_ms": rd.get(ap, "expires_after", f"{path}.approval",
                                                   parse_duration, 3_600_000)}
        notify = rd.get(r, "notify", path, _boolean, False)
        if notify and "notification" not in services:
            rd.fail(r, "notify", f"{path}.notify", "notify: true needs a notification service; "
                    "add 'notification: {}' under services")
        history: dict[str, int] = {}
        if "history" in r:
            h = rd.mapping(r, "history", f"{path}.history", frozenset(HISTORY_FIELDS),
                           hint="write history: {checkpoint_version: 16, lease_epoch: 6}")
            history = {k: rd.get(h, k, f"{path}.history", _integer(0)) for k in HISTORY_FIELDS if k in h}
        runs.append(RunSpec(
            id=rid, intent=intent, service=service, operation=operation, start_ms=start,
            deadline_ms=deadline, approval=approval,
            compensation_authority=rd.get(r, "compensation_authority", path,
                                          _choice(COMPENSATION_AUTHORITY, "compensation authority"), "granted"),
            notify=notify, history=history))
    return tuple(runs)


def _read_events(rd: _Reader, doc: dict, services: dict, run_ids: list[str], at, origin: int,
                 horizon: int) -> tuple[WorldEvent, ...]:
    events: list[WorldEvent] = []
    events_doc = rd.items(doc, "events", "events")
    for i in range(len(events_doc)):
        path = f"events[{i}]"
        raw = events_doc[i]
        if not isinstance(raw, dict):
            rd.fail(events_doc, i, path, "each event is a mapping with at least 'at' and 'type'")
        etype = rd.get(raw, "type", path, _choice(EVENT_TYPES, "event type"))
        allowed = EVENT_FIELDS[etype] | {"at", "type"} | (set() if etype in RUNLESS_EVENTS else {"run"})
        e = rd.mapping(events_doc, i, path, frozenset(allowed),
                       hint="put free-form content under 'payload'" if "payload" in allowed else "")
        anchor = match = None
        if isinstance(e.get("at"), dict):
            anchor, match, t = _read_anchor(rd, e, path, services, run_ids, at)
        else:
            t = rd.get(e, "at", path, at)
        if anchor is None and t >= horizon:
            rd.fail(e, "at", f"{path}.at", f"{format_time(t, origin)} is at or past the horizon "
                    f"{format_time(horizon, origin)}, so it would never happen; move it earlier or "
                    "extend clock.horizon")
        run = None
        if etype not in RUNLESS_EVENTS:
            run = rd.get(e, "run", path, _choice(run_ids, "run"), run_ids[0])
        data: dict[str, Any] = {}
        if etype == "deploy":
            if not e.keys() - {"at", "type"}:
                rd.fail(e, "type", path, "a deploy names the versions it changes, e.g. "
                        "canonicalization_version: 2")
            data = {k: rd.get(e, k, path, _integer(1)) for k in e if k in DEFAULT_ENV}
            if "services" in e:
                data["services"] = _read_contract_change(rd, e, path, services)
            elif not data:
                rd.fail(e, "type", path, "a deploy names the versions it changes, e.g. "
                        "code_version: 2, policy_version: 2")
            for item in rd.get(e, "alters", path, _string_list, []):
                if item not in DEPLOY_ALTERS:
                    rd.fail(e, "alters", f"{path}.alters", f"{item!r} is not something a deployment alters; "
                            f"choose from {', '.join(sorted(DEPLOY_ALTERS))}")
                if DEPLOY_ALTERS[item] not in data:
                    rd.fail(e, "alters", f"{path}.alters", f"a deploy that alters {item} changes "
                            f"{DEPLOY_ALTERS[item]} too (new code tells old state apart by that version); "
                            f"add {DEPLOY_ALTERS[item]}: N")
        elif etype == "other_actor":
            svc = rd.get(e, "service", path, _choice(sorted(services), "service (declare it under services)"),
                         "reservation" if "reservation" in services else sorted(services)[0])
            op = rd.get(e, "op", path, _choice(EFFECT_OPS[svc], f"{svc} effect"), PRIMARY_OPERATION[svc])
            data = {"service": svc, "op": op, "args": rd.get(e, "args", path, _plain_mapping, {})}
            if rd.get(e, "same_key", path, _boolean, False):
                # the other actor reuses the key of the call this event is anchored to (the
                # chapter's integrity error: the same key with other parameters)
                if anchor is None or match is None or match.port not in services:
                    rd.fail(e, "same_key", f"{path}.same_key", "same_key reuses the key of the call "
                            "the event is anchored to: anchor it to a service call, e.g. "
                            "at: {after: {port: reservation, op: reserve, nth: 1}}")
                if "key" in data["args"]:
                    rd.fail(e, "same_key", f"{path}.same_key", "args.key and same_key both name the "
                            "key; keep one")
                data["same_key"] = True
            why = malformed_request(svc, services[svc], op, dict(data["args"]))
            if why is not None:
                rd.fail(e, "args" if "args" in e else "op", f"{path}.args", f"{why}; the other actor's "
                        f"request must be one the {svc} service accepts (docs/scenarios.md, events)")
        else:
            payload = rd.get(e, "payload", path, _plain_mapping, {})
            clash = sorted(RESERVED_PAYLOAD_KEYS & set(payload))
            if clash:
                rd.fail(e, "payload", f"{path}.payload", f"{', '.join(clash)} controls delivery; "
                        "write it beside 'payload', not inside it")
            if "reason" in e:
                if "reason" in payload:
                    rd.fail(e, "reason", f"{path}.reason", "reason is given twice (also in payload); keep one")
                payload["reason"] = rd.get(e, "reason", path, _string)
            data = payload
            if etype == "event":
                data["kind"] = rd.get(e, "kind", path, _pattern(r"^[a-z][a-z0-9_]*$", "event kind "
                                                                "(lower-case, e.g. intake)"))
            if "duplicates" in e:
                data["duplicates"] = rd.get(e, "duplicates", path, _integer(0))
            if "duplicate_after" in e:
                data["duplicate_after_ms"] = rd.get(e, "duplicate_after", path, parse_duration)
            if "event_id" in e:
                data["event_id"] = rd.get(e, "event_id", path, _string)
            if "producer_seq" in e:
                data["producer_seq"] = rd.get(e, "producer_seq", path, _integer(0))
            if "producer" in e:
                data["producer"] = rd.get(e, "producer", path, _string)
            if "record" in e:
                data["record"] = rd.get(e, "record", path, _choice(CANCEL_RECORDS, "place a cancellation is "
                                                                         "recorded"))
        events.append(WorldEvent(at_ms=t, type=etype, run=run, data=data, line=_line(events_doc, i),
                                 anchor=anchor, match=match))
    events.sort(key=lambda ev: (ev.anchor is not None, ev.at_ms))
    return tuple(events)


def _read_contract_change(rd: _Reader, e: dict, path: str, services: dict) -> dict[str, dict]:
    """``deploy.services``: a deployment that changes a service's contract, ``{kind: {knob: value}}``
    over CONTRACT_KNOBS; the changed profile must be one the service can honour."""
    spath = f"{path}.services"
    change_doc = rd.mapping(e, "services", spath, frozenset(services),
                            hint="name a declared service and the contract knobs the deployment changes")
    out: dict[str, dict] = {}
    for name in change_doc:
        kpath = f"{spath}.{name}"
        knobs = rd.mapping(change_doc, name, kpath, frozenset(CONTRACT_KNOBS) & frozenset(
            k[:-3] if k.endswith("_ms") else k for k in PROFILE_DEFAULTS[name]),
            hint=f"a deployment changes {', '.join(CONTRACT_KNOBS)}")
        if not knobs:
            rd.fail(change_doc, name, kpath, "name at least one knob the deployment changes, e.g. retention: 10m")
        changed: dict = {}
        for knob in knobs:
            if knob in PROFILE_CHOICES[name]:
                changed[knob] = rd.get(knobs, knob, kpath, _choice(PROFILE_CHOICES[name][knob], knob))
            else:
                changed[f"{knob}_ms"] = rd.get(knobs, knob, kpath, parse_duration)
        merged = {**services[name], **changed}
        for knob, why in profile_conflicts(name, merged):
            rd.fail(knobs, next(iter(knobs)), f"{kpath}.{knob}", f"after this deployment: {why}")
        if merged.get("consistency") == "strong" and merged.get("lag_ms"):
            rd.fail(knobs, next(iter(knobs)), kpath, "after this deployment reads would lag under consistency: "
                    "strong; set consistency: eventual with the lag")
        out[name] = changed
    return out


def _read_match(rd: _Reader, m: dict, mpath: str, ports: Mapping, run_ids: list[str], at) -> Match:
    """One ``match`` mapping (faults, crashes, pauses, and events anchored to a call)."""
    port = rd.get(m, "port", mpath, _choice(sorted(ports), "port"), None)
    ops = ports[port] if port else frozenset().union(*ports.values())
    op = rd.get(m, "op", mpath, _choice(ops, f"operation{' of ' + port if port else ''}"), None)
    start = rd.get(m, "from", mpath, at, None)
    until = rd.get(m, "until", mpath, at, None)
    if start is not None and until is not None and until <= start:
        rd.fail(m, "until", f"{mpath}.until", "the window is empty: 'until' must come after 'from'")
    return Match(port=port, op=op, nth=rd.get(m, "nth", mpath, _integer(1), None),
                 worker=rd.get(m, "worker", mpath, _integer(1), None),
                 run=rd.get(m, "run", mpath, _choice(run_ids, "run"), None),
                 from_ms=start, until_ms=until,
                 knowledge=rd.get(m, "knowledge", mpath, _choice(KNOWLEDGE, "knowledge state"), None),
                 state=rd.get(m, "state", mpath, _choice(RUN_STATES, "run state"), None),
                 appends=rd.get(m, "appends", mpath, _choice(KNOWLEDGE, "knowledge state"), None),
                 disposition=rd.get(m, "disposition", mpath, _choice(RUN_STATES, "disposition"), None))


def _read_anchor(rd: _Reader, e: dict, path: str, services: dict, run_ids: list[str], at):
    """An event's ``at`` given as a mapping: (anchor, match, delay_ms)."""
    apath = f"{path}.at"
    a = rd.mapping(e, "at", apath, frozenset(ANCHORS) | {"delay"},
                   hint="write at: {after: {port: ledger, op: append, nth: 1}, delay: 1s}")
    given = [k for k in ANCHORS if k in a]
    if len(given) != 1:
        rd.fail(e, "at", apath, "an anchored event names exactly one of 'before' or 'after' with the "
                "call it waits for, e.g. at: {after: {port: ledger, op: append, nth: 1}}")
    anchor = given[0]
    m = rd.mapping(a, anchor, f"{apath}.{anchor}", MATCH_FIELDS)
    if not m:
        rd.fail(a, anchor, f"{apath}.{anchor}", "an empty match fires on the first port call; name a "
                "port, op, nth, worker, run or time window")
    ports = {**PLATFORM_PORTS, **{s: SERVICE_OPS[s] for s in services}}
    match = _read_match(rd, m, f"{apath}.{anchor}", ports, run_ids, at)
    return anchor, match, rd.get(a, "delay", apath, parse_duration, 0)


def _read_rules(rd: _Reader, doc: dict, services: dict, run_ids: list[str], at) -> tuple[Rule, ...]:
    ports = {**PLATFORM_PORTS, **{s: SERVICE_OPS[s] for s in services}}
    rules: list[Rule] = []
    for section in ("faults", "crashes", "pauses"):
        rules_doc = rd.items(doc, section, section)
        for i in range(len(rules_doc)):
            path = f"{section}[{i}]"
            r = rd.mapping(rules_doc, i, path, RULE_FIELDS[section])
            if "match" not in r:
                rd.fail(r, "match", f"{path}.match", "required field is missing; say which call it "
                        "applies to, e.g. match: {port: reservation, op: reserve, nth: 1}")
            mpath = f"{path}.match"
            m = rd.mapping(r, "match", mpath, MATCH_FIELDS)
            if not m:
                rd.fail(r, "match", mpath, "an empty match fires on the run's first port call; "
                        "name a port, op, nth, worker, run or time window")
            match = _read_match(rd, m, mpath, ports, run_ids, at)
            port = match.port
            action = RULE_ACTION[section]
            fault = code = None
            if action == "fault":
                fault = rd.get(r, "fault", path, _choice(FAULTS, "fault"))
                if fault in TRANSPORT_FAULTS and port not in services:
                    rd.fail(r, "fault", f"{path}.fault", f"{fault} is a transport fault of a service call; "
                            f"set match.port to a service ({', '.join(sorted(services))}) or use "
                            "fault: unavailable / error for a platform port")
                if fault in READ_FAULTS and (match.op is None or match.op in EFFECT_OPS.get(port, ())
                                             or match.op in ("describe", "release", "wait_job")):
                    rd.fail(r, "fault", f"{path}.fault", f"{fault} answers a read from a stale replica; set "
                            "match.op to an identifying read (lookup, search, aggregate, get_version)")
                code = rd.get(r, "code", path, _choice(ERROR_CODES, "error code"), None)
                if fault == "error" and code is None:
                    rd.fail(r, "fault", f"{path}.code", "fault: error needs a code, e.g. code: permission_denied")
                if code is not None and fault not in ("error", "unavailable"):
                    rd.fail(r, "code", f"{path}.code", f"a code applies to fault: error or unavailable, not {fault}")
            rules.append(Rule(
                action=action, match=match, fault=fault, code=code,
                boundary=rd.get(r, "boundary", path, _choice(BOUNDARIES, "boundary"), "before"),
                restart_after_ms=rd.get(r, "restart_after", path, parse_duration, 1000),
                resume_after_ms=rd.get(r, "resume_after", path, parse_duration, 0),
                delay_ms=rd.get(r, "delay", path, parse_duration, None),
                times=rd.get(r, "times", path, _integer(0), 1), line=_line(rules_doc, i)))
    return tuple(rules)


def _read_expect(rd: _Reader, doc: dict, services: dict, run_ids: list[str], at: Callable[[Any], int]) -> dict:
    if "expect" not in doc:
        return {}
    e = rd.mapping(doc, "expect", "expect", EXPECT_FIELDS)
    out: dict[str, Any] = {}
    if "dispositions" in e:
        out["dispositions"] = _read_dispositions(rd, e, run_ids)
    if "remote_effects" in e:
        out["remote_effects"] = rd.get(e, "remote_effects", "expect", _remote_effects(run_ids))
    if "evidence" in e:
        items = rd.items(e, "evidence", "expect.evidence")
        out["evidence"] = [rd.get(items, i, "expect.evidence", lambda v: _evidence_any(v, services))
                           for i in range(len(items))]
    if "absent" in e:
        items = rd.items(e, "absent", "expect.absent")
        out["absent"] = [rd.get(items, i, "expect.absent", lambda v: _absent_item(v, services))
                         for i in range(len(items))]
    if "disposition_at" in e:
        d = rd.mapping(e, "disposition_at", "expect.disposition_at", frozenset({"at", "dispositions"}))
        for need in ("at", "dispositions"):
            if need not in d:
                rd.fail(e, "disposition_at", f"expect.disposition_at.{need}",
                        "give both 'at' (a clock time) and 'dispositions' (the allowed list)")
        items = rd.items(d, "dispositions", "expect.disposition_at.dispositions")
        out["disposition_at"] = {
            "at_ms": rd.get(d, "at", "expect.disposition_at", at),
            "dispositions": [rd.get(items, i, "expect.disposition_at.dispositions",
                                    _choice(DISPOSITIONS, "disposition")) for i in range(len(items))]}
    if "violations" in e:
        items = rd.items(e, "violations", "expect.violations")
        out["violations"] = [rd.get(items, i, "expect.violations",
                                    _pattern(INVARIANT_PATTERN, "invariant id")) for i in range(len(items))]
    if "verdict" in e:
        out["verdict"] = rd.get(e, "verdict", "expect", _choice(VERDICTS, "verdict"))
    if "rules" in e:
        out["rules"] = _read_expect_rules(rd, e)
    return out


def _disposition_list(rd: _Reader, parent: Any, key: Any, path: str) -> list[str]:
    items = rd.items(parent, key, path)
    if not items:
        rd.fail(parent, key, path, "list at least one allowed disposition, or drop the field")
    return [rd.get(items, i, path, _choice(DISPOSITIONS, "disposition")) for i in range(len(items))]


def _read_dispositions(rd: _Reader, e: dict, run_ids: list[str]) -> list[str] | dict[str, list[str]]:
    """``expect.dispositions``: one list for every run, or a list per run ``{run id: [...]}``
    (every run of the scenario named once)."""
    if not isinstance(e.get("dispositions"), dict):
        return _disposition_list(rd, e, "dispositions", "expect.dispositions")
    per_run = rd.mapping(e, "dispositions", "expect.dispositions", frozenset(run_ids),
                         hint="a per-run list is keyed by the scenario's run ids")
    missing = [r for r in run_ids if r not in per_run]
    if missing:
        rd.fail(e, "dispositions", "expect.dispositions", f"no list for run {', '.join(missing)}; a per-run "
                "mapping names every run (or write one list for all runs)")
    return {rid: _disposition_list(rd, per_run, rid, f"expect.dispositions.{rid}") for rid in run_ids}


def _read_expect_rules(rd: _Reader, e: dict) -> dict[str, dict[str, str]]:
    """``expect.rules``: for each expectation, ``{point, source, quote}``: the rubric point a miss is
    charged to and the chapter or seed passage (section name and a short quote) behind it."""
    rules_doc = rd.mapping(e, "rules", "expect.rules", EXPECT_FIELDS - {"rules"},
                           hint="a rule names an expectation of this scenario")
    out = {}
    for name in rules_doc:
        path = f"expect.rules.{name}"
        if name not in e:
            rd.fail(rules_doc, name, path, f"a rule for '{name}', but expect has no '{name}'; "
                    "add the expectation or remove the rule")
        r = rd.mapping(rules_doc, name, path, frozenset(EXPECT_RULE_FIELDS))
        out[name] = {"point": rd.get(r, "point", path, _choice(RUBRIC_POINT_IDS, "rubric point")),
                     "source": rd.get(r, "source", path, _string),
                     "quote": rd.get(r, "quote", path, _string)}
    return out


def _remote_effects(run_ids: list[str]) -> Callable[[Any], Any]:
    """An exact total (int), bounds {min, max}, or a count per run {run id: n}."""
    def check(value: Any) -> Any:
        if isinstance(value, dict):
            if not value:
                raise ValueError("an empty mapping; give an integer, {min, max} or {run id: count}")
            out = {}
            for key, n in value.items():
                _choice(set(run_ids) | {"min", "max"}, "key (min, max or a run id)")(key)
                out[key] = _integer(0)(n)
            if out.get("min", 0) > out.get("max", out.get("min", 0)):
                raise ValueError("min is larger than max")
            return out
        try:
            return _integer(0)(value)
        except ValueError:
            raise ValueError(f"expected a count, {{min, max}} or {{run id: count}}, got {value!r}") from None
    return check


# --------------------------------------------------------------------------- files and library
def load_text(text: str, *, file: str | None = None) -> Scenario:
    return from_dict(_parse(text, file), file=file)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidScenario("no such scenario file; check the path, or give a library id "
                              "(`crashlab list`)", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidScenario(f"cannot read: {exc}", file=str(path)) from None


def load_file(path: str | Path) -> Scenario:
    path = Path(path)
    return load_text(_read(path), file=str(path))


def library_dir() -> Path:
    """The scenario library: ``scenarios/`` in a source checkout, ``harness/scenarios`` once
    installed (the wheel ships it as package data)."""
    source = Path(__file__).resolve().parent.parent.parent / "scenarios"
    if source.is_dir() and (source.parent / "pyproject.toml").exists():
        return source
    return Path(str(resources.files("crashlab") / "scenarios"))


def library() -> list[Scenario]:
    """Every scenario of the shipped library, sorted by id. A file is named after its id."""
    out = []
    for p in sorted(library_dir().glob("*.yaml")):
        doc = _parse(_read(p), str(p))
        sc = from_dict(doc, file=str(p))
        if sc.id != p.stem:
            raise InvalidScenario(f"the id does not match the file name; rename the file to {sc.id}.yaml "
                                  "or change the id", file=str(p), line=_line(doc, "id"), field="id")
        out.append(sc)
    return sorted(out, key=lambda s: s.id)


def resolve(name_or_path: str) -> Scenario:
    """A scenario id from the library, or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_file(p)
    folder = library_dir()
    candidate = folder / f"{name_or_path}.yaml"
    if candidate.is_file():
        return load_file(candidate)
    ids = sorted(c.stem for c in folder.glob("*.yaml"))
    near = difflib.get_close_matches(name_or_path, ids, n=3, cutoff=0.5) \
        or [i for i in ids if name_or_path in i][:3]
    raise InvalidScenario(f"unknown scenario id {name_or_path!r}"
                          + (f"; did you mean: {', '.join(near)}" if near else "")
                          + "; `crashlab list` shows every id", file=str(folder), field="id")

"""Scenarios: the YAML format, its loader and the compiled, frozen form the world runs.

A scenario file is loaded with ``yaml.SafeLoader`` (no object construction), every node's
line is remembered, and every error names the file, the line and the field. The format
is documented in docs/scenarios.md and as a JSON Schema in harness/data/scenario.schema.json.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import InvalidScenario
from .model import EFFECT_OPS, PLATFORM_PORTS, SERVICE_OPS, RunState
from .services import PROFILE_CHOICES, PROFILE_DEFAULTS

# --------------------------------------------------------------------------- time
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_DUR = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def clock_ms(text: str) -> int | None:
    m = _CLOCK.match(text.strip())
    if not m:
        return None
    h, mi, s = int(m[1]), int(m[2]), int(m[3] or 0)
    return ((h * 60 + mi) * 60 + s) * 1000


def parse_duration(value: Any) -> int:
    """``1500`` / ``"1500ms"`` / ``"90s"`` / ``"2m"`` / ``"24h"`` / ``"7d"`` -> milliseconds."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return value
    if isinstance(value, str):
        m = _DUR.match(value.strip())
        if m:
            return int(round(float(m[1]) * _UNITS[m[2]]))
    raise ValueError(f"expected a duration like 1500, '1500ms', '90s', '2m', '24h', got {value!r}")


def parse_time(value: Any, origin_ms: int) -> int:
    """A point on the scenario clock: ``"10:02"`` (wall-style, relative to the origin),
    or a duration after the origin (``"2m"``, ``120000``)."""
    if isinstance(value, str) and ":" in value:
        abs_ms = clock_ms(value)
        if abs_ms is None:
            raise ValueError(f"expected a clock time like '10:02' or '10:02:30', got {value!r}")
        if abs_ms < origin_ms:
            raise ValueError(f"{value} is before the scenario origin")
        return abs_ms - origin_ms
    return parse_duration(value)


def format_time(t_ms: int, origin_ms: int) -> str:
    """The scenario's own notation: 10:02 or 10:02:07.250."""
    total = origin_ms + t_ms
    h, rem = divmod(total, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    out = f"{h:02d}:{mi:02d}"
    if s or ms:
        out += f":{s:02d}"
    if ms:
        out += f".{ms:03d}"
    return out


# --------------------------------------------------------------------------- compiled form
@dataclass(frozen=True, slots=True, kw_only=True)
class Match:
    """Which port call a rule applies to. All given conditions must hold."""

    port: str | None = None
    op: str | None = None
    nth: int | None = None            # 1-based ordinal of (port, op) calls in the run
    worker: int | None = None         # 1-based worker number in the run
    run: str | None = None
    from_ms: int | None = None
    until_ms: int | None = None
    knowledge: str | None = None      # latest ledger knowledge of the call's key


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """A fault, crash or pause rule."""

    action: str                       # fault | crash | pause
    match: Match
    fault: str | None = None          # for action=fault
    code: str | None = None           # for fault=error
    boundary: str = "before"          # crash/pause: before | after the call took effect
    restart_after_ms: int = 1000      # crash: restart delay
    resume_after_ms: int = 0          # pause: how long the zombie sleeps
    delay_ms: int | None = None       # late_arrival / duplicate_delivery / throttled retry_after
    times: int = 1                    # how many matching calls it fires on (0 = unlimited)
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    id: str
    intent: Mapping[str, Any]
    service: str = "reservation"
    operation: str = "reserve"
    start_ms: int = 0
    deadline_ms: int | None = None
    approval: Mapping[str, Any] = field(default_factory=dict)   # mode, delay_ms, expires_after_ms
    compensation_authority: str = "granted"                     # granted | denied
    notify: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class WorldEvent:
    at_ms: int
    type: str
    run: str | None
    data: Mapping[str, Any]
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    id: str
    title: str
    tags: tuple[str, ...]
    card: Mapping[str, str]
    seed: int
    origin_ms: int
    horizon_ms: int
    services: Mapping[str, Mapping[str, Any]]
    runs: tuple[RunSpec, ...]
    events: tuple[WorldEvent, ...]
    rules: tuple[Rule, ...]
    expect: Mapping[str, Any]
    env: Mapping[str, Any]
    source: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def fmt(self, t_ms: int) -> str:
        return format_time(t_ms, self.origin_ms)


DEFAULT_ENV = {"code_version": 1, "schema_version": 1, "canonicalization_version": 1,
               "policy_version": 1, "capability_version": 1}
EVENT_TYPES = {"cancel", "approve", "deny", "revoke", "capability_change", "deploy", "callback",
               "operator_answer", "retry", "other_actor", "event"}
FAULTS = {"refused", "timeout_before_send", "drop_request", "lost_response", "late_arrival",
          "throttled", "server_error_before", "server_error_after", "duplicate_delivery",
          "unavailable", "error"}
CARD_FIELDS = ("known_before_failure", "survived", "recovery_owner", "authoritative_query",
               "terminal_state")
DISPOSITIONS = {s.value for s in RunState} - {"INTAKE"}


# --------------------------------------------------------------------------- YAML with lines
class _LineLoader(yaml.SafeLoader):
    pass


class _LDict(dict):
    __slots__ = ("lines", "line")


class _LList(list):
    __slots__ = ("line",)


def _construct_map(loader, node):
    loader.flatten_mapping(node)
    out = _LDict()
    out.lines = {}
    out.line = node.start_mark.line + 1
    for k_node, v_node in node.value:
        key = loader.construct_object(k_node, deep=True)
        if not isinstance(key, str):
            raise InvalidScenario(f"mapping keys must be strings, got {key!r}",
                                  line=k_node.start_mark.line + 1)
        if key in out:
            raise InvalidScenario(f"duplicate key '{key}'", line=k_node.start_mark.line + 1, field=key)
        out[key] = loader.construct_object(v_node, deep=True)
        out.lines[key] = v_node.start_mark.line + 1
    return out


def _construct_seq(loader, node):
    out = _LList(loader.construct_object(n, deep=True) for n in node.value)
    out.line = node.start_mark.line + 1
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)


class _Ctx:
    """Carries the file name for errors; ``fail`` names the field and its line."""

    def __init__(self, file: str | None) -> None:
        self.file = file

    def fail(self, container: Any, key: Any, path: str, message: str):
        line = None
        if isinstance(container, _LDict):
            line = container.lines.get(key, container.line)
        elif isinstance(container, _LList):
            line = container.line
        raise InvalidScenario(message, file=self.file, line=line, field=path)


def _known(ctx, d, allowed, path):
    if not isinstance(d, dict):
        ctx.fail(None, None, path, f"expected a mapping, got {type(d).__name__}")
    for key in d:
        if key not in allowed:
            ctx.fail(d, key, f"{path}.{key}" if path else key,
                     f"unknown field; expected one of: {', '.join(sorted(allowed))}")


def _req(ctx, d, key, path, types, default=...):
    if key not in d:
        if default is ...:
            ctx.fail(d, key, f"{path}.{key}" if path else key, "required field is missing")
        return default
    value = d[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,))):
        names = "/".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        ctx.fail(d, key, f"{path}.{key}" if path else key,
                 f"expected {names}, got {type(value).__name__} {value!r}")
    return value


def _conv(ctx, d, key, path, fn, default=...):
    if key not in d:
        if default is ...:
            ctx.fail(d, key, f"{path}.{key}" if path else key, "required field is missing")
        return default
    try:
        return fn(d[key])
    except (ValueError, TypeError) as exc:
        ctx.fail(d, key, f"{path}.{key}" if path else key, str(exc))


TOP_FIELDS = {"id", "title", "tags", "card", "seed", "clock", "services", "runs", "events",
              "faults", "crashes", "pauses", "expect", "env", "description"}


def from_dict(doc: Any, *, file: str | None = None) -> Scenario:
    ctx = _Ctx(file)
    if not isinstance(doc, dict):
        raise InvalidScenario("a scenario must be a YAML mapping at the top level", file=file, line=1)
    _known(ctx, doc, TOP_FIELDS, "")
    sid = _req(ctx, doc, "id", "", str)
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,79}", sid):
        ctx.fail(doc, "id", "id", "must be lower-case letters, digits, '.', '_' or '-' (at most 80), "
                 "starting with a letter or digit")
    title = _req(ctx, doc, "title", "", str)
    tags = _req(ctx, doc, "tags", "", list, [])
    for i, tag in enumerate(tags):
        if not isinstance(tag, str):
            ctx.fail(tags, i, f"tags[{i}]", "tags must be strings")
    card = _req(ctx, doc, "card", "", dict, {})
    _known(ctx, card, set(CARD_FIELDS), "card")
    seed = _req(ctx, doc, "seed", "", int, 1)
    clock = _req(ctx, doc, "clock", "", dict, {})
    _known(ctx, clock, {"origin", "horizon"}, "clock")
    origin = _conv(ctx, clock, "origin", "clock",
                   lambda v: _must(clock_ms(str(v)), f"expected a clock time like '10:00', got {v!r}"),
                   0)
    horizon = _conv(ctx, clock, "horizon", "clock", lambda v: parse_time(v, origin), 3_600_000)
    at = lambda v: parse_time(v, origin)  # noqa: E731

    services_doc = _req(ctx, doc, "services", "", dict, {"reservation": {}})
    services: dict[str, dict] = {}
    for name, prof in services_doc.items():
        path = f"services.{name}"
        if name not in PROFILE_DEFAULTS:
            ctx.fail(services_doc, name, path, f"unknown service; expected one of: "
                     f"{', '.join(sorted(PROFILE_DEFAULTS))}")
        prof = prof or {}
        defaults = PROFILE_DEFAULTS[name]
        allowed = {k[:-3] if k.endswith("_ms") else k for k in defaults} | set(defaults)
        _known(ctx, prof, allowed, path)
        merged = dict(defaults)
        for key, value in prof.items():
            target = key if key in defaults else key + "_ms"
            if target.endswith("_ms"):
                if value is None and defaults[target] is None:
                    merged[target] = None
                    continue
                merged[target] = _conv(ctx, prof, key, path, parse_duration)
            else:
                choices = PROFILE_CHOICES.get(key)
                if choices and value not in choices:
                    ctx.fail(prof, key, f"{path}.{key}", f"{value!r} is not one of {sorted(choices)}")
                if type(defaults[key]) is not type(value) and not (defaults[key] is None):
                    ctx.fail(prof, key, f"{path}.{key}",
                             f"expected {type(defaults[key]).__name__}, got {type(value).__name__}")
                merged[key] = value
        services[name] = merged

    runs_doc = _req(ctx, doc, "runs", "", list)
    if not runs_doc:
        ctx.fail(doc, "runs", "runs", "a scenario needs at least one run")
    runs = []
    for i, r in enumerate(runs_doc):
        path = f"runs[{i}]"
        _known(ctx, r, {"id", "intent", "service", "operation", "start", "deadline", "approval",
                        "compensation_authority", "notify"}, path)
        service = _req(ctx, r, "service", path, str, "reservation")
        if service not in services:
            ctx.fail(r, "service", f"{path}.service", f"service {service!r} is not declared under services")
        operation = _req(ctx, r, "operation", path, str, sorted(EFFECT_OPS[service])[-1]
                         if service != "reservation" else "reserve")
        if operation not in EFFECT_OPS[service]:
            ctx.fail(r, "operation", f"{path}.operation",
                     f"{operation!r} is not an effect of {service}; expected one of "
                     f"{sorted(EFFECT_OPS[service])}")
        approval = _req(ctx, r, "approval", path, dict, {"mode": "auto"})
        _known(ctx, approval, {"mode", "delay", "expires_after"}, f"{path}.approval")
        mode = approval.get("mode", "auto")
        if mode not in ("auto", "manual", "none"):
            ctx.fail(approval, "mode", f"{path}.approval.mode", "expected auto, manual or none")
        comp = _req(ctx, r, "compensation_authority", path, str, "granted")
        if comp not in ("granted", "denied"):
            ctx.fail(r, "compensation_authority", f"{path}.compensation_authority",
                     "expected granted or denied")
        runs.append(RunSpec(
            id=_req(ctx, r, "id", path, str, "run-1" if i == 0 else f"run-{i + 1}"),
            intent=_req(ctx, r, "intent", path, dict), service=service, operation=operation,
            start_ms=_conv(ctx, r, "start", path, at, 0),
            deadline_ms=_conv(ctx, r, "deadline", path, at, None),
            approval={"mode": mode,
                      "delay_ms": _conv(ctx, approval, "delay", f"{path}.approval", parse_duration, 60_000),
                      "expires_after_ms": _conv(ctx, approval, "expires_after", f"{path}.approval",
                                                parse_duration, 3_600_000)},
            compensation_authority=comp, notify=_req(ctx, r, "notify", path, bool, False)))
    run_ids = [r.id for r in runs]
    if len(set(run_ids)) != len(run_ids):
        ctx.fail(doc, "runs", "runs", "run ids must be unique")

    events = []
    for i, e in enumerate(_req(ctx, doc, "events", "", list, [])):
        path = f"events[{i}]"
        if not isinstance(e, dict):
            ctx.fail(doc["events"], i, path, "each event is a mapping with at least 'at' and 'type'")
        etype = _req(ctx, e, "type", path, str)
        if etype not in EVENT_TYPES:
            ctx.fail(e, "type", f"{path}.type", f"unknown event type {etype!r}; expected one of: "
                     f"{', '.join(sorted(EVENT_TYPES))}")
        run = _req(ctx, e, "run", path, str, run_ids[0] if etype not in ("deploy", "other_actor") else None)
        if run is not None and run not in run_ids:
            ctx.fail(e, "run", f"{path}.run", f"no run {run!r}; runs are: {', '.join(run_ids)}")
        data = {k: v for k, v in e.items() if k not in ("at", "type", "run")}
        if etype == "deploy":
            _known(ctx, data, set(DEFAULT_ENV), path)
        for dkey in ("delay", "duplicate_after"):
            if dkey in data:
                data[dkey + "_ms"] = _conv(ctx, e, dkey, path, parse_duration)
                del data[dkey]
        events.append(WorldEvent(at_ms=_conv(ctx, e, "at", path, at), type=etype, run=run,
                                 data=data, line=getattr(e, "line", None)))
    events.sort(key=lambda ev: ev.at_ms)

    rules = []
    for section, action in (("faults", "fault"), ("crashes", "crash"), ("pauses", "pause")):
        for i, r in enumerate(_req(ctx, doc, section, "", list, [])):
            path = f"{section}[{i}]"
            _known(ctx, r, {"match", "fault", "code", "boundary", "restart_after", "resume_after",
                            "delay", "times"}, path)
            m = _req(ctx, r, "match", path, dict)
            _known(ctx, m, {"port", "op", "nth", "worker", "run", "from", "until", "knowledge"},
                   f"{path}.match")
            port = _req(ctx, m, "port", f"{path}.match", str, None)
            op = _req(ctx, m, "op", f"{path}.match", str, None)
            all_ports = {**PLATFORM_PORTS, **{s: SERVICE_OPS[s] for s in services}}
            if port is not None and port not in all_ports:
                ctx.fail(m, "port", f"{path}.match.port", f"unknown port {port!r}; expected one of: "
                         f"{', '.join(sorted(all_ports))}")
            if op is not None:
                ops = all_ports[port] if port else set().union(*all_ports.values())
                if op not in ops:
                    ctx.fail(m, "op", f"{path}.match.op", f"unknown operation {op!r}"
                             f"{' for port ' + port if port else ''}; expected one of: {', '.join(sorted(ops))}")
            run = _req(ctx, m, "run", f"{path}.match", str, None)
            if run is not None and run not in run_ids:
                ctx.fail(m, "run", f"{path}.match.run", f"no run {run!r}")
            match = Match(port=port, op=op, nth=_req(ctx, m, "nth", f"{path}.match", int, None),
                          worker=_req(ctx, m, "worker", f"{path}.match", int, None), run=run,
                          from_ms=_conv(ctx, m, "from", f"{path}.match", at, None),
                          until_ms=_conv(ctx, m, "until", f"{path}.match", at, None),
                          knowledge=_req(ctx, m, "knowledge", f"{path}.match", str, None))
            fault = None
            if action == "fault":
                fault = _req(ctx, r, "fault", path, str)
                if fault not in FAULTS:
                    ctx.fail(r, "fault", f"{path}.fault", f"unknown fault {fault!r}; expected one of: "
                             f"{', '.join(sorted(FAULTS))}")
            boundary = _req(ctx, r, "boundary", path, str, "before")
            if boundary not in ("before", "after"):
                ctx.fail(r, "boundary", f"{path}.boundary", "expected before or after")
            rules.append(Rule(
                action=action, match=match, fault=fault, code=_req(ctx, r, "code", path, str, None),
                boundary=boundary,
                restart_after_ms=_conv(ctx, r, "restart_after", path, parse_duration, 1000),
                resume_after_ms=_conv(ctx, r, "resume_after", path, parse_duration, 0),
                delay_ms=_conv(ctx, r, "delay", path, parse_duration, None),
                times=_req(ctx, r, "times", path, int, 1), line=getattr(r, "line", None)))

    expect = _req(ctx, doc, "expect", "", dict, {})
    _known(ctx, expect, {"dispositions", "remote_effects", "evidence", "violations", "verdict"}, "expect")
    for i, d in enumerate(expect.get("dispositions", [])):
        if d not in DISPOSITIONS:
            ctx.fail(expect["dispositions"], i, f"expect.dispositions[{i}]",
                     f"unknown disposition {d!r}; expected one of: {', '.join(sorted(DISPOSITIONS))}")
    env = dict(DEFAULT_ENV)
    env_doc = _req(ctx, doc, "env", "", dict, {})
    _known(ctx, env_doc, set(DEFAULT_ENV), "env")
    env.update(env_doc)
    return Scenario(id=sid, title=title, tags=tuple(tags), card=dict(card), seed=seed,
                    origin_ms=origin, horizon_ms=horizon, services=services, runs=tuple(runs),
                    events=tuple(events), rules=tuple(rules), expect=dict(expect), env=env,
                    source=file, raw=_plain(doc))


def _must(value, message):
    if value is None:
        raise ValueError(message)
    return value


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_text(text: str, *, file: str | None = None) -> Scenario:
    try:
        doc = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except InvalidScenario as exc:
        raise InvalidScenario(exc.message.split(": ", 1)[-1] if exc.file is None else exc.message,
                              file=file, line=exc.line, field=exc.field) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InvalidScenario(f"not valid YAML: {problem}", file=file,
                              line=mark.line + 1 if mark else None) from None
    return from_dict(doc, file=file)


def load_file(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidScenario("no such scenario file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidScenario(f"cannot read: {exc}", file=str(path)) from None
    return load_text(text, file=str(path))


def library_dir() -> Path:
    """The scenario library: ``scenarios/`` in a source checkout, ``harness/scenarios`` once
    installed (the wheel ships it as package data)."""
    source = Path(__file__).resolve().parent.parent / "scenarios"
    if source.is_dir() and (source.parent / "pyproject.toml").exists():
        return source
    return Path(str(resources.files("harness") / "scenarios"))


def library() -> list[Scenario]:
    """Every scenario of the shipped library, sorted by id."""
    out = [load_file(p) for p in sorted(library_dir().glob("*.yaml"))]
    return sorted(out, key=lambda s: s.id)


def resolve(name_or_path: str) -> Scenario:
    """A scenario id from the library, or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_file(p)
    for candidate in library_dir().glob("*.yaml"):
        if candidate.stem == name_or_path:
            return load_file(candidate)
    ids = sorted(c.stem for c in library_dir().glob("*.yaml"))
    near = [i for i in ids if name_or_path in i][:5]
    raise InvalidScenario(f"unknown scenario id {name_or_path!r}"
                          + (f"; did you mean: {', '.join(near)}" if near else "")
                          + "; `crashlab list` shows every id")

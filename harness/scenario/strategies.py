"""Hypothesis strategies for fault schedules, exported for users.

A *schedule* is a scenario document (the YAML form, as a dict) with extra crash, pause,
fault and event rules drawn on top of a base scenario: swarm testing in the manner of
FoundationDB and TigerBeetle, where each example draws its own fault mix. Because a
schedule is a plain scenario document, a failing one shrinks (hypothesis does that) and
prints as a YAML scenario that reproduces it::

    from hypothesis import given
    from crashlab.scenario.strategies import schedules

    @given(schedules(base_doc))
    def test_my_adapter(doc):
        check_scenario(from_dict(doc), "my_pkg:MyAdapter")

``port_calls`` and ``arguments`` draw port calls with arguments of every shape, right and wrong
(crashlab.world.ports.ARGUMENTS), for fuzzing what crosses the boundary. ``calls`` (from
:func:`crashlab.run.explore.probe_calls`) narrows crash and pause points to the
port calls the adapter actually makes, so most draws hit a real boundary.
"""
from __future__ import annotations

import copy
from typing import Iterable, Sequence

from hypothesis import strategies as st

from ..vocab.model import EFFECT_OPS, PLATFORM_PORTS, SERVICE_OPS, RunState

#: Transport faults drawn on service calls (each with its own send boundary).
SERVICE_FAULTS = ("refused", "timeout_before_send", "drop_request", "lost_response", "late_arrival",
                  "throttled", "server_error_before", "server_error_after", "duplicate_delivery",
                  "unavailable")
#: Faults the platform ports can suffer: every operation but the clock's, the random draw and the
#: run's own reporting channel (run.info, run.finish: the harness's record of the run, not a store).
STORE_FAULTS = tuple(sorted((port, op) for port, ops in PLATFORM_PORTS.items()
                            if port not in ("clock", "random", "run") for op in ops))
#: Definite refusals drawn on service calls, compensation included: the service answered and did
#: nothing (a validation failure stops; a denied permission is an authority result).
DEFINITE_ERRORS = ("validation_failed", "permission_denied", "intent_mismatch")
Call = tuple[str, str, int]


def _default_calls(services: Iterable[str]) -> list[Call]:
    calls: list[Call] = []
    for port in ("ledger", "checkpoints"):
        for op in sorted(PLATFORM_PORTS[port]):
            calls.extend((port, op, n) for n in range(1, 5))
    for svc in sorted(services):
        for op in sorted(SERVICE_OPS[svc]):
            calls.extend((svc, op, n) for n in range(1, 3))
    return calls


def boundaries(calls: Sequence[Call]) -> st.SearchStrategy[dict]:
    """A crash rule at one of ``calls``, before or after the call took effect."""
    return st.builds(
        lambda call, boundary, restart: {"match": {"port": call[0], "op": call[1], "nth": call[2]},
                                         "boundary": boundary, "restart_after": f"{restart}ms"},
        st.sampled_from(list(calls)), st.sampled_from(["before", "after"]),
        st.integers(min_value=0, max_value=120_000))


def pauses(calls: Sequence[Call]) -> st.SearchStrategy[dict]:
    """A pause (the worker becomes a zombie) at one of ``calls``."""
    eligible = [c for c in calls if c[1] not in ("finish",)] or list(calls)
    return st.builds(
        lambda call, boundary, resume: {"match": {"port": call[0], "op": call[1], "nth": call[2]},
                                        "boundary": boundary, "resume_after": f"{resume}ms"},
        st.sampled_from(eligible), st.sampled_from(["before", "after"]),
        st.integers(min_value=1_000, max_value=600_000))


def service_faults(services: Iterable[str], calls: Sequence[Call] = ()) -> st.SearchStrategy[dict]:
    """A transport fault on a service call: one the adapter makes (or its next repetition,
    the retry or the recovery's call), or any operation with an ordinal up to 3."""
    ops = [(svc, op) for svc in sorted(services) for op in sorted(SERVICE_OPS[svc]) if op != "describe"]
    fault = lambda target, kind, delay: {"match": {"port": target[0], "op": target[1], "nth": target[2]},  # noqa: E731
                                         "fault": kind, "delay": f"{delay}ms"}
    delays = st.integers(min_value=1, max_value=90_000)
    anywhere = st.builds(fault, st.tuples(st.sampled_from(ops), st.integers(1, 3)).map(lambda t: (*t[0], t[1])),
                         st.sampled_from(SERVICE_FAULTS), delays)
    made = sorted({(p, o, k) for p, o, n in calls if (p, o) in set(ops) for k in (n, n + 1)})
    if not made:
        return anywhere
    return st.one_of(st.builds(fault, st.sampled_from(made), st.sampled_from(SERVICE_FAULTS), delays), anywhere)


def conflicts(services: Iterable[str], calls: Sequence[Call] = ()) -> st.SearchStrategy[dict]:
    """An injected 409 (conflict_in_flight: the same key is executing elsewhere) on an effect call."""
    ops = [(svc, op) for svc in sorted(services) for op in sorted(SERVICE_OPS[svc])
           if op in EFFECT_OPS.get(svc, ())]
    made = sorted({(p, o, n) for p, o, n in calls if (p, o) in set(ops)}) or [(*t, 1) for t in ops]
    return st.builds(lambda target: {"match": {"port": target[0], "op": target[1], "nth": target[2]},
                                     "fault": "error", "code": "conflict_in_flight"},
                     st.sampled_from(made))


def definite_refusals(services: Iterable[str], calls: Sequence[Call] = ()) -> st.SearchStrategy[dict]:
    """A definite refusal (validation_failed, permission_denied, intent_mismatch) of a service call
    the adapter makes, once, or of every call of that operation (a release refused every time)."""
    ops = [(svc, op) for svc in sorted(services) for op in sorted(SERVICE_OPS[svc]) if op != "describe"]
    made = sorted({(p, o, n) for p, o, n in calls if (p, o) in set(ops)}) or [(*t, 1) for t in ops]

    def refusal(target, code, every):
        match = {"port": target[0], "op": target[1]} if every else \
            {"port": target[0], "op": target[1], "nth": target[2]}
        return {"match": match, "fault": "error", "code": code, **({"times": 0} if every else {})}
    return st.builds(refusal, st.sampled_from(made), st.sampled_from(DEFINITE_ERRORS), st.booleans())


def store_faults() -> st.SearchStrategy[dict]:
    return st.builds(
        lambda target, nth: {"match": {"port": target[0], "op": target[1], "nth": nth}, "fault": "unavailable"},
        st.sampled_from(STORE_FAULTS), st.integers(1, 4))


#: Input events drawn on top of a base: a user's cancellation, an operator's deliberate retry
#: (one fixed event id, so its copies are duplicates of one intent), a late manual approval, a
#: stray completion callback (duplicated, it is a duplicate callback).
INPUT_EVENTS = ("cancel", "retry", "approve", "callback")
#: Base events whose delivery can be duplicated (the same event id delivered again).
DUPLICABLE = frozenset({"cancel", "callback", "operator_answer", "retry", "deny", "event"})


def input_events(run_ids: Sequence[str], horizon_ms: int) -> st.SearchStrategy[dict]:
    """Input events, duplicated and reordered: the same event id delivered more than once, at a
    time inside the first half of the base's clock (so recovery has time to react), or late in
    the second half, when the run is usually terminal (a post-terminal event must rewrite no
    history)."""
    def event(kind, run, at, dups, gap):
        ev = {"at": f"{at}ms", "type": kind, "run": run}
        if kind == "retry":
            ev.update(event_id="retry-generated", producer="operator")
        if kind == "callback":
            ev.update(event_id="callback-generated", producer="reservation")
        if kind != "approve":
            ev.update(duplicates=dups, duplicate_after=f"{gap}ms")
        return ev

    half = max(1, horizon_ms // 2 - 1)
    early = st.integers(0, half)
    late = st.integers(half + 1, max(half + 1, horizon_ms - 60_000))
    return st.builds(event, st.sampled_from(INPUT_EVENTS), st.sampled_from(list(run_ids)),
                     st.one_of(early, late), st.integers(0, 2), st.integers(0, 30_000))


def anchored_cancellations(run_ids: Sequence[str], calls: Sequence[Call]) -> st.SearchStrategy[dict]:
    """A cancellation anchored to a call the adapter makes (AR-08 "Cancellation races": just before
    or just after a conditional write, around a dispatch), so it races the adapter's own step
    whatever its pace."""
    points = [c for c in calls if c[0] in ("ledger", "checkpoints") or c[1] in ("reserve", "publish", "send",
                                                                                 "release")] or list(calls)
    return st.builds(
        lambda call, side, delay, run: {"at": {side: {"port": call[0], "op": call[1], "nth": call[2]},
                                               **({"delay": f"{delay}ms"} if side == "after" else {})},
                                        "type": "cancel", "run": run},
        st.sampled_from(points), st.sampled_from(["before", "after"]), st.integers(0, 5_000),
        st.sampled_from(list(run_ids)))


def situations(run_ids: Sequence[str], horizon_ms: int, calls: Sequence[Call]) -> st.SearchStrategy[dict]:
    """Situations a single rule cannot draw, as ``{"events", "crashes", "lag"}`` parts of a schedule:

    * a migration: new code (schema_version 9, transition meaning altered) deployed as a call the
      adapter makes completes, the worker dying there so that its replacement runs the new code, and
      now and then a cancellation just before or just after that call (cancellations around migrations);
    * a cancellation at a time, and a crash right after the first inbox poll from that time (the one
      that reads it): a crash right after the cancellation is read;
    * reads lagging longer than the late-delivery bound (``lag``: a factor of the bound)."""
    points = list(calls) or [("ledger", "append", 1)]
    half = max(1, horizon_ms // 2 - 1)

    def migration(call, cancel_side, run):
        anchor = {"port": call[0], "op": call[1], "nth": call[2]}
        events = [{"at": {"after": anchor}, "type": "deploy", "schema_version": 9, "alters": ["transition_meaning"]}]
        if cancel_side is not None:
            events.append({"at": {cancel_side: anchor}, "type": "cancel", "run": run})
        return {"events": events, "crashes": [{"match": anchor, "boundary": "after"}]}

    def read_then_crash(at, run):
        return {"events": [{"at": f"{at}ms", "type": "cancel", "run": run}],
                "crashes": [{"match": {"port": "inbox", "op": "poll", "run": run, "from": f"{at}ms"},
                             "boundary": "after"}]}

    return st.one_of(
        st.builds(migration, st.sampled_from(points), st.sampled_from([None, "before", "after"]),
                  st.sampled_from(list(run_ids))),
        st.builds(read_then_crash, st.integers(0, half), st.sampled_from(list(run_ids))),
        st.builds(lambda factor: {"lag": factor}, st.floats(min_value=1.05, max_value=2.0)))


def _apply_situation(doc: dict, part: dict) -> None:
    doc["events"] = list(doc.get("events") or []) + part.get("events", [])
    doc["crashes"] = list(doc.get("crashes") or []) + part.get("crashes", [])
    if "lag" in part:
        services = doc.setdefault("services", {"reservation": {}}) or {}
        doc["services"] = services
        profile = services.get("reservation")
        if "reservation" in services and isinstance(profile, dict | type(None)):
            profile = dict(profile or {})
            bound = _duration_ms(profile.get("max_delivery_delay", profile.get("max_delivery_delay_ms", 60_000)))
            profile.pop("lag_ms", None)
            profile.update(consistency="eventual", lag=f"{int(bound * part['lag'])}ms")
            services["reservation"] = profile


def _duration_ms(value) -> int:
    from ..vocab.timefmt import parse_duration

    try:
        return int(parse_duration(value))
    except (TypeError, ValueError):
        return 60_000


@st.composite
def duplicated(draw, events: list) -> list:
    """The base's own events with one inbox event (if any) delivered again, later."""
    events = copy.deepcopy(list(events))
    eligible = [i for i, ev in enumerate(events) if isinstance(ev, dict) and ev.get("type") in DUPLICABLE]
    if eligible and draw(st.booleans()):
        ev = events[draw(st.sampled_from(eligible))]
        ev["duplicates"] = int(ev.get("duplicates") or 0) + draw(st.integers(1, 2))
        ev["duplicate_after"] = f"{draw(st.integers(0, 60_000))}ms"
    return events


@st.composite
def schedules(draw, base: dict, calls: Sequence[Call] | None = None, *, max_crashes: int = 2,
              max_faults: int = 2, pauses_allowed: bool = True, events_allowed: bool = True) -> dict:
    """A scenario document: ``base`` plus drawn crashes, pauses, faults and input events."""
    doc = copy.deepcopy(base)
    services = list((doc.get("services") or {"reservation": {}}).keys())
    points = list(calls) if calls else _default_calls(services)
    run_ids = [r.get("id", f"run-{i + 1}") for i, r in enumerate(doc.get("runs", []))] or ["run-1"]
    crashes, faults, paused = _rule_strategies(services, points, max_crashes, max_faults)
    doc["crashes"] = list(doc.get("crashes") or []) + draw(crashes)
    doc["faults"] = list(doc.get("faults") or []) + draw(faults)
    if pauses_allowed:
        doc["pauses"] = list(doc.get("pauses") or []) + draw(paused)
    if events_allowed:
        horizon = _reused(_horizon, base)  # the base's own clock decides where events may fall
        doc["events"] = draw(duplicated(doc.get("events") or [])) + draw(
            _event_strategy(run_ids, horizon, points))
        for part in draw(_reused(_situation_strategy, tuple(run_ids), horizon, tuple(points))):
            _apply_situation(doc, part)
    doc["seed"] = draw(st.integers(min_value=0, max_value=2**31 - 1))
    doc["expect"] = {}  # a generated schedule is judged by the generic invariants alone
    doc["id"] = f"{base.get('id', 'schedule')}.generated"
    doc.setdefault("tags", [])
    doc["tags"] = [t for t in doc["tags"] if t != "generated"] + ["generated"]
    return doc


# Every example of a schedule draws from the same few strategies: they are built (and validated by
# hypothesis, which costs more than drawing) once per distinct argument, not once per example. A
# strategy object draws the same values from the same choices however often it is reused. The key
# is the arguments' repr, so that 1, 1.0 and True (equal as dict keys) stay apart.
_BUILT: dict[str, tuple] = {}


def _reused(build, *args):
    key = repr((build.__name__, args))
    built = _BUILT.get(key)
    if built is None:  # one entry per base scenario and probe: a few hundred for the whole library
        built = _BUILT[key] = build(*args)
    return built


def _horizon(base: dict) -> int:
    from .loader import from_dict

    return from_dict(base).horizon_ms


def _rule_strategies(services: list, points: list, max_crashes: int, max_faults: int) -> tuple:
    def build(services, points, max_crashes, max_faults):
        return (st.lists(boundaries(points), max_size=max_crashes),
                st.lists(st.one_of(service_faults(services, points), store_faults(), conflicts(services, points),
                                   definite_refusals(services, points)), max_size=max_faults),
                st.lists(pauses(points), max_size=1))
    return _reused(build, services, points, max_crashes, max_faults)


def _situation_strategy(run_ids: tuple, horizon: int, points: tuple) -> st.SearchStrategy:
    return st.lists(situations(run_ids, horizon, points), max_size=1)


def _event_strategy(run_ids: list, horizon: int, points: list) -> st.SearchStrategy:
    def build(run_ids, horizon, points):
        drawn = [input_events(run_ids, horizon)]
        if points:
            drawn.append(anchored_cancellations(run_ids, points))
        return st.lists(st.one_of(drawn), max_size=1)
    return _reused(build, run_ids, horizon, points)


# --------------------------------------------------------------------------- port-call arguments
def json_values(max_leaves: int = 8) -> st.SearchStrategy:
    """Any JSON value within the protocol's limits (docs/protocol.md "Limits")."""
    def json_value_strategy(max_leaves):
        scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**63 - 1), max_value=2**63 - 1)
                   | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
        return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=max_leaves)
    return _reused(json_value_strategy, max_leaves)


def _typed(types: tuple) -> st.SearchStrategy:
    """A value of one of ``types`` (Python types as in crashlab.world.ports.ARGUMENTS)."""
    from ..world.ports import ANY

    def typed_strategy(names):
        words = st.sampled_from(sorted({s.value for s in RunState} | {"reserve", "release", "caller", "k-1", "R-1",
                                                                     "J-1", "backoff", "reconcile"}))
        by_name = {"str": st.text(max_size=12) | words,
                   "int": st.integers(min_value=-(2**63 - 1), max_value=2**63 - 1) | st.integers(0, 100_000),
                   "float": st.floats(allow_nan=False, allow_infinity=False), "bool": st.booleans(),
                   "dict": st.dictionaries(st.text(max_size=8), json_values(4), max_size=3),
                   "list": st.lists(json_values(4), max_size=3), "NoneType": st.none(), "object": json_values()}
        return st.one_of([by_name[n] for n in names])
    assert all(t in (str, int, float, bool, dict, list, type(None), ANY) for t in types)
    return _reused(typed_strategy, tuple(t.__name__ for t in types))


@st.composite
def arguments(draw, port: str, op: str) -> dict:
    """Arguments for ``port.op`` of every shape: each documented field (crashlab.world.ports.ARGUMENTS)
    left out, of its type, or any JSON value, and now and then a field the operation does not
    have. Most draws break the shape somewhere: the boundary must answer them ``bad_request``."""
    from ..world.ports import ARGUMENTS

    args: dict = {}
    for spec in ARGUMENTS.get((port, op), ()):
        choice = draw(st.sampled_from(("typed", "typed", "any", "absent")))
        if choice == "absent":
            continue
        value = draw(_typed(spec.types) if choice == "typed" else json_values())
        head, _, rest = spec.path.partition(".")
        if rest:
            parent = args.get(head)
            if isinstance(parent, dict):
                parent[rest] = value
        else:
            args[head] = value
    if draw(st.integers(0, 4)) == 0:
        args[draw(st.text(max_size=8))] = draw(json_values(4))
    return args


@st.composite
def port_calls(draw, services: Iterable[str] = ("reservation", "notification", "registry")) -> tuple:
    """``(port, op, args)``: an operation of a platform port or of one of ``services`` (now and then
    one that does not exist) with :func:`arguments` of every shape."""
    ops = sorted((p, o) for p, names in PLATFORM_PORTS.items() for o in names) \
        + sorted((s, o) for s in services for o in SERVICE_OPS[s])
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([p for p, _ in ops])), draw(st.text(max_size=8)), draw(
            st.dictionaries(st.text(max_size=8), json_values(4), max_size=3))
    port, op = draw(st.sampled_from(ops))
    return port, op, draw(arguments(port, op))

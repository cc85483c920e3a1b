"""One integration run of one scenario, and the integration suite.

``integrate(scenario, worker=..., out=...)`` starts the sandbox and the supervisor, drives the
worker to the end, writes the trace (``OUT/{scenario}.jsonl``, checkable by ``crashlab check``,
``show`` and ``report`` like any trace) with the card's inputs in its header, and judges it on the
integration card, as every reader of the file does (crashlab.checks.card.judged).
"""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, replace
from pathlib import Path

from ..checks.verdict import check_trace
from ..vocab.results import ScenarioResult
from ..vocab.files import atomic_writer
from ..run import isolate
from ..runtimes import Runtime, Server
from ..sandbox.server import UNDELIVERED
from ..vocab.compiled import Scenario
from ..vocab.model import WAITING_STATES
from ..world.trace import write_jsonl
from ..checks.card import FIELD, Card, RuntimeRun, RuntimeSection, judged
from ..run.repro import repro_line
from . import deploy
from .supervisor import DEFAULT_TIME_SCALE, HANDOVER_WAIT_S, WALL_LIMIT_S, Supervisor

#: The integration suite is the library scenarios with this tag: those a real worker process can
#: meet as written (their faults are on service calls, the worker's store or its process group).
SUITE_TAG = "integration"
#: Each suite scenario's description says what it exercises with real processes, after this.
EXERCISES = "With real processes:"


def suite() -> list[Scenario]:
    """The integration suite: every library scenario tagged ``integration``, in library order."""
    from ..scenario.loader import library

    return [sc for sc in library() if SUITE_TAG in sc.tags]


def exercises(sc: Scenario) -> str:
    """What a scenario exercises with real processes (the end of its description)."""
    _, found, text = str(sc.raw.get("description") or "").partition(EXERCISES)
    return " ".join(text.split()).rstrip(".") if found else ""

#: The runtime subset (docs/runtimes/): where a durable runtime's own retry or redelivery meets an
#: ambiguous effect. The naive runtime examples fail each of these for the chapter's rule and the
#: careful ones pass them (tests/test_runtimes_*.py); ``--suite`` runs them all the same.
#: ``integration-keyless-502`` is examples/integration/scenarios/keyless-502.yaml.
RUNTIME_SUITE: dict[str, str] = {
    "integration-keyless-502": "502 after the commit on a service with no keys: the runtime's retry duplicates (EFF-01, "
                               "RETRY-01)",
    "crash-4-after-commit-before-record": "kill after the commit: the recovered step or redelivered task resends with no "
                                          "read (RETRY-01)",
    "t2-commit-before-record": "kill after the commit, keyed service: one commit, yet a blind resend (RETRY-01)",
    "matrix-weak-service": "lost response on a service with no keys and no lookup: the runtime's retry duplicates (EFF-01)",
    "matrix-retry-amplification": "a proxy re-sends on 5xx and the runtime retries too: three retry owners, five holds "
                                  "(RETRY-03, EFF-01)",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    scenario: str
    trace: Path
    result: ScenarioResult
    card: Card


#: each further attempt of a scenario whose card is inconclusive runs this many times slower (--again-slower)
AGAIN_SLOWER = 5.0


def attempt_scale(time_scale: float, slower: float, attempt: int) -> float:
    """The time scale attempt ``attempt`` (1, 2, ...) runs at: ``time_scale``, then ``slower`` times lower
    for each further attempt (100, 20, 4 at 5), never below real time (1) unless ``time_scale`` is."""
    return max(time_scale / slower ** (attempt - 1), min(time_scale, 1.0))


@dataclass(frozen=True, slots=True)
class Attempt:
    """An earlier attempt that did not count: the time scale it ran at and why it was inconclusive."""
    time_scale: float
    why: str


def until_conclusive(once, again: int, *, time_scale: float = DEFAULT_TIME_SCALE,
                     slower: float = 1.0) -> tuple[Outcome, list[Attempt], float]:
    """``once(scale)`` (one integration run of a scenario at that time scale), run again while its card is
    inconclusive, at most ``again`` more times, each further attempt at a lower time scale
    (:func:`attempt_scale`): an inconclusive card says the scenario's premise did not happen under real
    time, most often because a window on the scenario clock closed before a slow worker got there, so
    nothing was tested; a slower attempt gives the worker more scenario time. A pass or a fail is
    final. The last outcome, the earlier attempts (each one's time scale and first reason) and the time
    scale of the last one."""
    earlier: list[Attempt] = []
    while True:
        scale = attempt_scale(time_scale, slower, len(earlier) + 1)
        outcome = once(scale)
        if outcome.card.verdict != "inconclusive" or len(earlier) >= again:
            return outcome, earlier, scale
        earlier.append(Attempt(scale, outcome.card.reasons[0] if outcome.card.reasons else "inconclusive"))


def integrate(scenario: Scenario, *, worker: str, out: Path, store: str = "sqlite:{db}",
              time_scale: float = DEFAULT_TIME_SCALE, wall_limit_s: float = WALL_LIMIT_S,
              handover_wait_s: float = HANDOVER_WAIT_S, runtime: Runtime | None = None,
              server: Server | None = None, worker_next: str | None = None) -> Outcome:
    """``runtime`` and its started ``server`` (crashlab.runtimes): every worker gets the server's
    environment and its run's unit-of-work id; the runtime's record of each run is written beside
    the trace and summarized on the card. ``worker_next``: the next code version's command, started by the
    scenario's deploy events (crashlab.integrate.deploy); without it they are not carried out."""
    out = Path(out)
    work = out / scenario.id
    token = secrets.token_hex(4)
    ids = {spec.id: f"{scenario.id}.{spec.id}.{token}" for spec in scenario.runs} if server is not None else {}
    sup = Supervisor(scenario, worker, store=store, out=work, time_scale=time_scale, wall_limit_s=wall_limit_s,
                     handover_wait_s=handover_wait_s, runtime_env=server.env if server is not None else None, runtime_ids=ids,
                     runtime_name=runtime.name if runtime is not None and server is not None else None,
                     runtime_writable=tuple(getattr(server, "writable", ())), worker_next=worker_next)
    events = sup.run()
    path = out / f"{scenario.id}.jsonl"
    # an intake on the clock is the run's start (a worker polls until it arrives), and its duplicates ask the
    # same of a worker whenever they come: neither makes the expectations' outcome a matter of order
    timed = [f"{ev.type} at {scenario.fmt(ev.at_ms)}" for ev in scenario.events
             if ev.anchor is None and ev.run is not None and ev.type != "other_actor"
             and ev.type not in UNDELIVERED and not is_intake(ev)]
    undelivered = [f"{ev.type} at {scenario.fmt(ev.at_ms)}" for ev in scenario.events
                   if ev.type in UNDELIVERED and not worker_next]      # with it, the supervisor redeploys
    views = set.intersection(*(rs.store.views_found for rs in sup.runs.values())) if sup.runs else set()
    unexercised = unmet_rules(scenario, events, timed) + deploy.unmet(scenario, worker_next) \
        + deploy.unmet_migration(scenario, events)
    # what the supervisor saw that the events do not show: in the header, so the card is the trace's own
    # (beside the run's options, which the supervisor wrote there for the repro line)
    events[0][FIELD] = {**(events[0].get(FIELD) or {}), "views": sorted(views), "notes": sup.notes + unexercised,
                        "cut": list(sup.cut), "timed": timed, "undelivered": undelivered, "missed": list(sup.missed),
                        "isolation": isolate.current().to_json(), "clocks": list(sup.clocks),
                        "deployed": list(sup.deployed_texts)}
    write_jsonl(events, path)
    result = replace(check_trace(events, trace_path=str(path)), repro=repro_line(events[0]))
    verdict = judged(events)       # the card check_trace judged this trace by (kept for the same events)
    if server is not None and runtime is not None:
        verdict = replace(verdict, runtime=runtime_section(runtime, server, ids, events, work))
    return Outcome(scenario=scenario.id, trace=path, result=result, card=verdict)


def is_intake(ev) -> bool:
    """A scenario event that delivers a run's intake (``type: event, kind: intake``)."""
    return ev.type == "intake" or (ev.type == "event" and (ev.data or {}).get("kind") == "intake")


def _rule_text(rule) -> str:
    m = rule.match
    call = ".".join(p for p in (m.port, m.op) if p) or "any call"
    what = rule.fault if rule.action == "fault" else f"{rule.action} {rule.boundary}"
    where = f" (line {rule.line})" if rule.line is not None else ""
    return f"the {rule.action} rule{where}, {what} on {call}" + (f" #{m.nth}" if m.nth else "")


def unmet_rules(scenario: Scenario, events: list[dict], timed: list[str] = ()) -> list[str]:
    """The scenario's premises that did not happen, one reason each: a fault, crash or pause rule that
    met no request, and a store failpoint armed in a worker that never fired (the worker never reached
    it, or does not honour CRASHLAB_FAILPOINT). A scenario whose premise did not happen did not test
    what it says: the card is inconclusive, never a pass (its other rules still fail a worker)."""
    fired: set = set()
    armed: dict = {}
    stale = {ev.get("stale") for ev in events if ev.get("kind") == "takeover"}
    # a crash rule met by a replaced worker's request is spent, as the sandbox spends it: no zombie is killed
    zombie_calls = [(ev.get("port"), ev.get("op"), ev.get("nth")) for ev in events
                    if ev.get("kind") == "call" and ev.get("lane") == "port" and ev.get("worker") in stale]
    for ev in events:
        kind = ev.get("kind")
        if kind in ("fault", "crash", "pause"):
            line = ev.get("rule_line")
            fired.add(line if line is not None else (kind, ev.get("fault") if kind == "fault" else ev.get("boundary")))
        elif kind == "failpoint":
            armed.setdefault(ev.get("rule_line"), []).append(f"{ev.get('failpoint')} in {ev.get('worker')}")
    clock = f"; the scenario's {timed[0]} is on the clock, and under real time a clock event may come before the " \
            "requests it was meant to meet" if timed else ""
    out = []
    moot = deploy.moot_rules(scenario)     # a deployment's restart rule: the supervisor's stop carries it out
    for rule in scenario.rules:
        if rule.line in moot:
            continue
        key = rule.line if rule.line is not None else (rule.action, rule.fault if rule.action == "fault" else rule.boundary)
        m = rule.match
        if key in fired or (rule.action == "crash" and any(
                port == m.port and m.op in (None, op) and m.nth in (None, nth) for port, op, nth in zombie_calls)):
            continue
        if rule.line is not None and rule.line in armed:
            out.append(f"{_rule_text(rule)} did not happen: its failpoint was armed ({', '.join(armed[rule.line])}) "
                       "and never fired (the worker never reached that store write, or does not honour "
                       "CRASHLAB_FAILPOINT: docs/integration.md, \"Failpoints\"), so the crash the scenario tests "
                       "never happened")
        else:
            out.append(f"{_rule_text(rule)} did not happen: it met no request, so the run never reached what the "
                       f"scenario tests{clock}")
    return out


#: the dispositions a run waits in (a worker started after one runs the run's next unit of work)
WAITING = frozenset(str(s.value) for s in WAITING_STATES)


def woken_units(events: list[dict], run: str) -> list[int]:
    """The run's woken units of work, as the examples number them (docs/runtimes/README.md, "woken"): a
    worker started after the run's Nth waiting finish runs unit N (``CRASHLAB_RUNTIME_ID.woken-N``); each
    N above 0 that some worker of the run started in, in order."""
    waits, seen = 0, []
    for ev in events:
        if ev.get("run") != run:
            continue
        if ev.get("kind") == "finish" and ev.get("disposition") in WAITING:
            waits += 1
        elif ev.get("kind") == "start" and waits and waits not in seen:
            seen.append(waits)
    return seen


def runtime_section(runtime: Runtime, server: Server, ids: dict[str, str], events: list[dict],
                    work: Path) -> RuntimeSection:
    """Read the runtime's own record of every run, write it to ``runtime-record.{run}.json`` and
    summarize it beside the sandbox's count of commits for that run."""
    runs = []
    for run, base in ids.items():
        commits = sum(1 for ev in events if ev.get("kind") == "effect" and ev.get("run") == run
                      and ev.get("cause") != "other_actor")
        for woken in [0, *woken_units(events, run)]:
            unit = f"{base}.woken-{woken}" if woken else base
            try:
                record = server.record(unit)
            except Exception as exc:   # a runtime's record that cannot be read is shown, never a traceback
                record = [{"error": f"the runtime's record could not be read: {type(exc).__name__}: {exc}"}]
            path = work / f"runtime-record.{run}{f'.woken-{woken}' if woken else ''}.json"
            with atomic_writer(path) as fh:
                fh.write(json.dumps({"runtime": runtime.name, "version": runtime.tested_version, "unit": unit,
                                     "record": record}, indent=1, sort_keys=True, default=str) + "\n")
            summarize = getattr(server, "summary", None)
            line = summarize(record) if callable(summarize) else f"{len(record)} row(s) in the runtime's record"
            runs.append(RuntimeRun(run=run, unit=unit, summary=line, commits=commits, record=str(path),
                                   woken=woken))
    return RuntimeSection(name=runtime.name, title=runtime.title, version=runtime.tested_version,
                          settings=runtime.retry_owner_settings, runs=tuple(runs))

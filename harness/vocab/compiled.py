"""The compiled scenario: the frozen form a loaded scenario takes and the world runs (its
runs, its world events, its fault, crash and pause rules and the match each rule applies to).

Times are milliseconds after the scenario's origin; the loader (scenario_loader) builds these.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .timefmt import format_time


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
    state: str | None = None          # checkpoints.write: the state the new checkpoint declares
    appends: str | None = None        # ledger.append: the knowledge of the entry being appended
    disposition: str | None = None    # run.finish: the disposition being reported


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
    #: A run that arrives with earlier history: its checkpoint store already stands at this
    #: version (earlier contents archived) and its lease has had this many epochs.
    history: Mapping[str, int] = field(default_factory=dict)    # checkpoint_version, lease_epoch


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerClock:
    """A real worker's wall clock (``worker_clocks:``, crashlab integrate only): the run's n-th worker
    (every run's, when ``run`` is None) reads a clock ``offset_ms`` of scenario time off the real one,
    running at ``rate`` times real speed from its start. The simulator's workers read the scenario clock."""

    worker: int                       # 1-based worker number in the run
    run: str | None = None
    offset_ms: int = 0                # scenario time; negative: behind
    rate: float = 1.0                 # 1: real speed; 0.1: a tenth of it (a slow clock)
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorldEvent:
    at_ms: int                        # absolute time; for an anchored event, its delay after the call
    type: str
    run: str | None
    data: Mapping[str, Any]
    line: int | None = None
    anchor: str | None = None         # before | after: delivered when a port call matching ``match``
    match: Match | None = None        # happens (before it executes / after it completes), plus at_ms


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
    worker_clocks: tuple[WorkerClock, ...] = ()

    def fmt(self, t_ms: int) -> str:
        return format_time(t_ms, self.origin_ms)

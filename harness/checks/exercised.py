"""What a scenario exercised, as opposed to what it merely did not violate.

This module alone decides it, for the report's pages and index, the rubric scorecard and the
integration card (:func:`idle`, :func:`coverage`).

A pass of an invariant is "held" only when the trace had events for it to judge: a run
that never met throttling says nothing about the throttling rule. Each invariant names
the trace facts that exercise it (:data:`EXERCISED_BY`); the facts are counted from the
trace (:func:`counts`): ambiguous sends, takeovers, fenced writes, duplicates, and so on.
Where nothing was counted the report says "not exercised", never a pass (Jepsen and Elle
say what was checked and answer "unknown" when nothing was).

A failing scenario is told apart by what failed (:func:`severity`): a violated invariant
(red FAIL) or only a difference from the scenario's own expectation, the `EXP-*` checks
(amber DIFFERS: a correct alternative design may end in another allowed-looking state).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..vocab.model import ERROR_CODES, is_dispatch
from ..vocab.results import ScenarioResult

#: The facts counted in a trace, with how the report names them.
FACTS = {
    "runs": "runs", "checkpoints": "checkpoint writes", "ledger": "ledger appends",
    "dispatches": "effect sends", "ambiguous": "ambiguous sends", "retries": "resends",
    "takeovers": "takeovers", "fenced": "fenced writes", "pauses": "pauses",
    "refusals": "refusals (validation, permission, changed intent, exists)", "throttled": "throttled answers",
    "permission_denied": "permission denials", "deployments": "deployments", "late": "late callbacks or arrivals",
    "duplicates": "duplicate deliveries", "cancellations": "cancellations", "approvals": "approval events",
    "compensations": "compensation steps",
    "cancelled_committed": "cancelled runs with a confirmed effect", "conflicts": "key conflicts", "fencing_sends": "sends to a fencing service",
    "unresolved": "unresolved finishes", "escalations": "escalations", "finishes": "accepted finishes",
    "expect_dispositions": "expected dispositions", "expect_effects": "expected effect count",
    "expect_evidence": "required evidence", "expect_absent": "forbidden evidence",
    "expect_disposition_at": "expected disposition at a time",
    "deadline_checkpoints": "checkpoint writes of a run with a business deadline",
    "deadline_finishes": "accepted finishes of a run with a business deadline",
    "unfinished": "runs with no accepted finish",
}
#: The counts a report shows on every scenario page (the rest are in the folded table).
HEADLINE = ("ambiguous", "takeovers", "fenced", "retries", "duplicates", "cancellations")
#: Which facts exercise which invariant: it was judged on real events when any of them is counted.
EXERCISED_BY: dict[str, tuple[str, ...]] = {
    "TRUTH-01": ("finishes", "ledger"), "EVID-01": ("ledger",), "RETRY-01": ("ambiguous",),
    "CLS-01": ("refusals",), "CLS-02": ("throttled",), "AUTH-02": ("permission_denied",),
    "MIG-01": ("deployments",), "PIN-01": ("deployments",), "KNOW-01": ("ledger",), "KNOW-02": ("ledger",),
    "LATE-01": ("late",), "OWN-02": ("dispatches", "ledger", "finishes"), "OWN-03": ("checkpoints",),
    "CKPT-01": ("checkpoints",), "OWN-01": ("takeovers", "pauses", "fenced"), "FENCE-01": ("fencing_sends",),
    "RETRY-03": ("dispatches",), "RETRY-02": ("retries",), "JIT-01": ("retries",),
    "OWN-04": ("unresolved",), "PKT-01": ("escalations",), "PREP-01": ("dispatches",),
    "PREP-02": ("dispatches",), "KEY-01": ("dispatches",), "EFF-01": ("dispatches",),
    "EFF-02": ("dispatches",), "EVT-01": ("duplicates",), "EVT-02": ("duplicates",), "KEY-02": ("dispatches",),
    "KEY-03": ("conflicts",), "AUTH-01": ("dispatches",), "REC-01": ("ambiguous",),
    "COMP-01": ("compensations", "cancelled_committed"), "HIST-01": ("checkpoints",), "DISP-01": ("finishes",), "ADAPTER-FAULT": ("runs",),
    "CANCEL-01": ("cancellations",), "CANCEL-02": ("cancellations",), "DISP-02": ("finishes",),
    "TRUTH-02": ("finishes",), "TERM-01": ("finishes",),
    "EXP-DISPOSITION": ("expect_dispositions",), "EXP-EFFECTS": ("expect_effects",),
    "EXP-EVIDENCE": ("expect_evidence",), "EXP-ABSENT": ("expect_absent",),
    "EXP-DISPOSITION-AT": ("expect_disposition_at",),
    "CLS-03": ("refusals", "throttled", "retries"), "LEASE-01": ("runs",), "DEAD-02": ("deadline_checkpoints",),
    "PKT-02": ("escalations",), "MSG-01": ("finishes",), "REC-02": ("ambiguous",), "DEAD-01": ("deadline_finishes",),
}
#: Rules about how every run ends: a run with no accepted finish (its worker died, or the run was cut,
#: before run.finish) gave them nothing to judge, whatever else the trace holds. DISP-01's check charges
#: such a run to ADAPTER-FAULT (or calls it inconclusive) rather than judge it; an expectation compares
#: the run's end with the scenario's, and the run has none.
NEEDS_EVERY_FINISH = frozenset({"DISP-01", "EXP-DISPOSITION", "EXP-EFFECTS", "EXP-EVIDENCE", "EXP-ABSENT",
                                "EXP-DISPOSITION-AT"})
FENCE_CODES = frozenset({"fenced", "stale_epoch", "version_conflict"})   # not lease_held: waiting is not a refused write
REFUSAL_CODES = frozenset({"validation_failed", "permission_denied", "intent_mismatch", "already_exists"})
CONFLICT_CODES = frozenset({"intent_mismatch", "already_exists", "conflict_in_flight"})
UNRESOLVED = frozenset({"FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN", "CANCELLED_EFFECT_REMAINS",
                        "CANCELLED_EFFECT_UNKNOWN", "WAITING_OPERATOR"})


def counts(events: list[dict]) -> dict[str, int]:
    """How often each fact of :data:`FACTS` occurs in a trace (header first)."""
    head = events[0] if events else {}
    n = dict.fromkeys(FACTS, 0)
    n["runs"] = len(head.get("runs") or ())
    expect = head.get("expect") if isinstance(head.get("expect"), dict) else {}
    for fact, field in (("expect_dispositions", "dispositions"), ("expect_effects", "remote_effects"),
                        ("expect_evidence", "evidence"), ("expect_absent", "absent"),
                        ("expect_disposition_at", "disposition_at")):
        n[fact] = int(expect.get(field) is not None and expect.get(field) != [])
    fencing = {name for name, svc in (head.get("services") or {}).items() if isinstance(svc, dict) and svc.get("fencing")}
    env = head.get("env")
    runs = [r for r in head.get("runs") or () if isinstance(r, dict)]
    # "no deadline" (docs/invariants.md): the intake names no business deadline (the header's runs[].deadline null)
    timed = {r.get("id") for r in runs if r.get("deadline") is not None}
    finished: set = set()
    committed: set = set()      # runs whose ledger confirmed an effect of their own (not a compensation)
    cancelled: set = set()
    calls: dict[int, dict] = {}
    answered: set[int] = set()
    sent: set[tuple] = set()
    delivered: set[tuple] = set()
    for ev in events:
        lane, kind = ev.get("lane"), ev.get("kind")
        if lane == "port" and kind == "call":
            calls[ev.get("seq")] = ev
            port, op = str(ev.get("port")), str(ev.get("op"))
            if is_dispatch(port, op):
                n["dispatches"] += 1
                n["fencing_sends"] += port in fencing
                args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
                ident = (ev.get("run"), port, op, str(args.get("key")))
                n["retries"] += ident in sent
                sent.add(ident)
                n["compensations"] += op == "release"      # a release sent, with or without a ledger entry
        elif lane == "port" and kind == "result":
            answered.add(ev.get("call"))
            call = calls.get(ev.get("call")) or {}
            err = ev.get("error") if isinstance(ev.get("error"), dict) else {}
            code = err.get("code")
            dispatch = is_dispatch(str(call.get("port")), str(call.get("op")))
            if dispatch and ((not ev.get("ok") and not err.get("definite") and code in ERROR_CODES)
                             or ev.get("delivered") is False):
                n["ambiguous"] += 1
            n["fenced"] += code in FENCE_CODES
            n["refusals"] += code in REFUSAL_CODES and dispatch
            n["throttled"] += code == "throttled"
            n["permission_denied"] += code == "permission_denied"
            n["conflicts"] += code in CONFLICT_CODES
        elif lane == "run" and kind in ("checkpoint", "checkpoint_rejected"):
            n["checkpoints"] += 1
            n["deadline_checkpoints"] += ev.get("run") in timed
            n["fenced"] += kind == "checkpoint_rejected"
        elif lane == "knowledge" and kind == "ledger":
            n["ledger"] += 1
            entry = ev.get("entry") if isinstance(ev.get("entry"), dict) else {}
            n["compensations"] += entry.get("kind") == "compensation" and ev.get("previous") is None
            if ev.get("knowledge") == "CONFIRMED" and entry.get("kind") != "compensation":
                committed.add(ev.get("run"))
        elif kind == "ledger_rejected":
            n["fenced"] += 1
        elif lane == "run" and kind == "lease" and ev.get("op") == "acquire" and int(ev.get("epoch") or 0) > 1:
            n["takeovers"] += 1
        elif lane == "fault" and kind == "pause":
            n["pauses"] += 1
        elif lane == "world" and kind == "deploy":
            n["deployments"] += 1
        elif lane == "worker" and kind == "start" and env is not None and ev.get("env") not in (None, env):
            n["deployments"] += 1
        elif lane == "remote" and kind == "late_arrival":
            n["late"] += 1
        elif lane == "remote" and kind == "duplicate_delivery":
            n["duplicates"] += 1
        elif lane == "world" and kind == "deliver":
            body = ev.get("event") if isinstance(ev.get("event"), dict) else {}
            ident = (ev.get("run"), body.get("event_id"))
            n["duplicates"] += ident in delivered
            # a completion callback delivered through the run's inbox: what LATE-01 judges (it may
            # start no effect and change no disposition), whether a worker then reads it or not
            n["late"] += body.get("type") == "callback" and ident not in delivered
            delivered.add(ident)
        elif lane == "world" and kind == "cancel":
            n["cancellations"] += 1
            cancelled.add(ev.get("run"))
        elif kind in ("approval_requested", "approval_granted", "revoke", "capability_change"):
            n["approvals"] += 1
        elif lane == "run" and kind == "escalation":
            n["escalations"] += 1
        elif lane == "run" and kind == "finish" and ev.get("accepted"):
            n["finishes"] += 1
            n["deadline_finishes"] += ev.get("run") in timed
            n["unresolved"] += str(ev.get("disposition")) in UNRESOLVED
            finished.add(ev.get("run"))
    # a dispatch that never got an answer (the worker crashed or the run ended first) is ambiguous too
    n["ambiguous"] += sum(1 for seq, c in calls.items() if seq not in answered
                          and is_dispatch(str(c.get("port")), str(c.get("op"))))
    # COMP-01 judges whether a confirmed original is kept (never rewritten to "never happened", a release
    # under its own key): a run cancelled with an effect of its own confirmed (either order) had the
    # occasion to compensate it or to keep it and hand the corrective proposal to the operator
    n["cancelled_committed"] = len(cancelled & committed)
    n["unfinished"] = sum(1 for r in runs if r.get("id") not in finished)
    return n


def idle(check_id: str, n: dict) -> str | None:
    """Why ``check_id`` had nothing to judge in a trace with the facts ``n`` (:func:`counts`), or None
    when it was exercised. The one decision of "exercised" for every page, card and scorecard."""
    if check_id in NEEDS_EVERY_FINISH and n.get("unfinished"):
        return (f"{n['unfinished']} run(s) ended with no accepted finish (the worker died or the run was cut "
                "before run.finish): there is no end to judge")
    wanted = EXERCISED_BY.get(check_id)
    if not wanted or any(n.get(f) for f in wanted):
        return None
    return "no " + " or ".join(FACTS[f] for f in wanted) + " in this run"


@dataclass(frozen=True, slots=True, kw_only=True)
class Coverage:
    """Per invariant of the catalogue: violated, held (exercised and not violated), not exercised
    (no events to judge) or, on an integration trace, not judgeable (the rule lives where a real
    worker's trace cannot show it: crashlab.checks.card)."""

    violated: tuple[str, ...]
    held: tuple[str, ...]
    not_exercised: tuple[str, ...]
    counts: dict
    not_judgeable: tuple[str, ...] = ()


def coverage(result: ScenarioResult, events: list[dict] | None, catalogue: list[str]) -> Coverage | None:
    """None when no trace was saved (nothing can be said of what was exercised)."""
    if not events:
        return None
    n = counts(events)
    violated = {v.invariant for v in result.violations}
    status: dict[str, str] = {}
    from .card import is_integration

    if is_integration(events[0]):         # the integration card's statuses, which use idle() too
        from .card import judged

        status = {line.invariant: line.status for line in judged(events).lines}
        # the card decides: a finding of a rule it cannot judge is no violation (whatever result was passed)
        violated = {i for i in violated if i not in status} | {i for i, s in status.items() if s == "fail"}
    held, unexercised, unjudgeable = [], [], []
    for inv in catalogue:
        if inv in violated:
            continue
        if status.get(inv) == "not judgeable":
            unjudgeable.append(inv)
        else:
            (unexercised if idle(inv, n) is not None else held).append(inv)
    return Coverage(violated=tuple(i for i in catalogue if i in violated) + tuple(sorted(violated - set(catalogue))),
                    held=tuple(held), not_exercised=tuple(unexercised), counts=n, not_judgeable=tuple(unjudgeable))


# --------------------------------------------------------------------------- charged to another point
def charged_elsewhere(results) -> dict[str, dict[str, dict[str, list[str]]]]:
    """A rubric point's own checks violated but charged to another point (an expectation miss
    whose scenario's rule names another point, crashlab.checks.rubric.point_for): point id ->
    check -> the point it is charged to -> the scenarios, in order. Such a violation exercised the
    point and costs it nothing; the scorecard and the report name it where the point is shown."""
    from .rubric import POINT_OF, RUBRIC, point_for

    out: dict[str, dict[str, dict[str, list[str]]]] = {}
    for res in results:
        for v in res.violations:
            home, routed = POINT_OF.get(v.invariant), point_for(v)
            if home is None or routed is None or home.id == routed.id:
                continue
            ids = out.setdefault(home.id, {}).setdefault(v.invariant, {}).setdefault(routed.id, [])
            if res.id not in ids:
                ids.append(res.id)
    order = {p.id: n for n, p in enumerate(RUBRIC)}         # the points charged, in rubric order
    return {home: {check: dict(sorted(to.items(), key=lambda kv: order[kv[0]])) for check, to in checks.items()}
            for home, checks in out.items()}


def elsewhere_heads(checks: dict[str, dict[str, list[str]]]) -> list[tuple[str, tuple[str, ...]]]:
    """Each check of one point (:func:`charged_elsewhere`) as every face words it, before the
    scenarios it lists: ``its EXP-EVIDENCE was violated in 21 scenarios, but their rules charge it
    to O4 (1), E4 (20)``; with those scenarios."""
    out = []
    for check, to in checks.items():
        ids = tuple(dict.fromkeys(s for scenarios in to.values() for s in scenarios))
        points = ", ".join(pid if len(to) == 1 else f"{pid} ({len(s)})" for pid, s in to.items())
        out.append((f"its {check} was violated in 1 scenario, but that scenario's rule charges it to {points}"
                    if len(ids) == 1 else
                    f"its {check} was violated in {len(ids)} scenarios, but their rules charge it to {points}", ids))
    return out


def listed(ids, limit: int = 3) -> str:
    """``a, b, c and 18 more``."""
    ids = list(ids)
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def headline(n: dict) -> str:
    """``ambiguous sends 1 · takeovers 1 · fenced writes 0 · …``"""
    return " · ".join(f"{FACTS[k]} {n.get(k, 0)}" for k in HEADLINE)


# --------------------------------------------------------------------------- severity
def severity(result: ScenarioResult) -> str:
    """pass | unknown | fail (an invariant was violated, or an automatic failure) | differs
    (only the scenario's own expectations, the ``EXP-*`` checks, were missed)."""
    if result.verdict != "fail":
        return result.verdict
    if not result.violations:
        return "fail"
    if all(v.invariant.startswith("EXP-") and not v.auto_fail for v in result.violations):
        return "differs"
    return "fail"


def safety_violated(result: ScenarioResult) -> bool:
    """Whether a safety invariant (one a correct design never fails) was violated."""
    from . import EXPECTATIONS, INVARIANTS

    safe = {i.id for i in (*INVARIANTS, *EXPECTATIONS) if i.safety}
    return any(v.invariant in safe or v.auto_fail for v in result.violations)

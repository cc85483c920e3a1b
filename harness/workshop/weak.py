"""The weak-service redesign: the chapter's three bounded options as service profiles
(data/scenarios/weak-*.yaml), the learner's designs run against each, and the comparison
table measured from those runs (effect correctness, authority, latency, operational burden,
remaining ambiguity)."""
from __future__ import annotations

from ..checks.invariants import INVARIANTS
from ..timefmt import format_time
from . import evidence as E
from .questions import Expected

PROFILES = {"as_is": "weak-as-is", "human_proposal": "weak-human-proposal",
            "service_command": "weak-service-command", "outbox_ack": "weak-outbox-ack"}
#: design name (the closed vocabulary) -> the adapter that implements it
DESIGNS = {"store_and_retry": "crashlab.gallery.retries:BlindRetry",
           "reconcile_or_escalate": "crashlab.reference_impl:ReferenceAdapter",
           "escalate_every_ambiguity": "crashlab.gallery.alternatives:EscalateEveryAmbiguity"}
SAFETY = frozenset(inv.id for inv in INVARIANTS if inv.safety)


def measure(profile: str, adapter) -> dict:
    """One row of the comparison table, from the run's own trace."""
    from ..conformance import run_one

    result, verdict = run_one(E.scenario_of(PROFILES[profile]), adapter)
    events = result.events
    origin = events[0]["origin_ms"]
    effects = [e for e in events if e["lane"] == "remote" and e["kind"] == "effect" and e.get("cause") != "other_actor"]
    finish = [e for e in events if e["lane"] == "run" and e["kind"] == "finish" and e.get("accepted")]
    disposition = finish[-1]["disposition"] if finish else None
    escalations = sum(1 for e in events if e["lane"] == "run" and e["kind"] == "escalation")
    waits = sum(1 for e in events if e["lane"] == "run" and e["kind"] == "approval_requested")
    unsafe = sorted({v.invariant for v in verdict.violations if v.invariant in SAFETY})
    return {"profile": profile, "effects": len(effects),
            "correct": "yes" if len(effects) <= 1 and not unsafe else "no: " + ", ".join(unsafe or ["duplicate"]),
            "authority": "human" if disposition == "WAITING_HUMAN" and not effects else "agent",
            "latency": ("waits for a human" if disposition == "WAITING_HUMAN"
                        else format_time(finish[-1]["t"], origin) if finish else "-"),
            "burden": f"{escalations} escalation(s), {waits} human step(s)",
            "ambiguity": ("hidden by an unsafe retry" if unsafe
                          else "effect unknown" if disposition and "UNKNOWN" in disposition else "none"),
            "disposition": disposition, "unsafe": unsafe}


def table(rows: list[tuple[str, dict]]) -> str:
    head = ("option", "design", "effect correct", "effects", "authority", "finished", "operational burden",
            "remaining ambiguity")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for design, m in rows:
        lines.append(" | ".join(str(x) for x in (m["profile"], design, m["correct"], m["effects"], m["authority"],
                                                  m["latency"], m["burden"], m["ambiguity"])))
    return "\n".join(lines)


def safe_designs(profile: str) -> Expected:
    ok = sorted(d for d, spec in DESIGNS.items() if not measure(profile, spec)["unsafe"])
    return Expected(mode="one_of", accepted=frozenset(ok), shown=ok[0] if ok else None)


def unambiguous_options() -> Expected:
    spec = DESIGNS["reconcile_or_escalate"]
    ok = sorted(p for p in PROFILES if p != "as_is" and measure(p, spec)["ambiguity"] == "none")
    return Expected(mode="exact", accepted=frozenset(ok), shown=ok)

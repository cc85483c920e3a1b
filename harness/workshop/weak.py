"""The weak-service redesign: the chapter's three bounded options as service profiles
(data/scenarios/weak-*.yaml), the learner's designs run against each, and the comparison
table measured from those runs (effect correctness, authority, latency, operational burden,
remaining ambiguity)."""
from __future__ import annotations

from pathlib import Path

from ..checks.invariants import INVARIANTS
from ..vocab.timefmt import format_time
from . import evidence as E
from .questions import Expected

PROFILES = {"as_is": "weak-as-is", "human_proposal": "weak-human-proposal",
            "service_command": "weak-service-command", "outbox_ack": "weak-outbox-ack"}
#: design name (the closed vocabulary) -> the adapter that implements it
DESIGNS = {"store_and_retry": "crashlab.gallery.retries:BlindRetry",
           "reconcile_or_escalate": "crashlab.reference_impl:ReferenceAdapter",
           "escalate_every_ambiguity": "crashlab.gallery.alternatives:EscalateEveryAmbiguity"}
SAFETY = frozenset(inv.id for inv in INVARIANTS if inv.safety)


def measure(profile, adapter) -> dict:
    """One row of the comparison table, from the run's own trace (``profile``: a name of
    PROFILES, or a compiled scenario such as a learner's option)."""
    from ..run.conformance import run_one

    scenario = E.scenario_of(PROFILES[profile]) if isinstance(profile, str) else profile
    result, verdict = run_one(scenario, adapter)
    events = result.events
    origin = events[0]["origin_ms"]
    effects = [e for e in events if e["lane"] == "remote" and e["kind"] == "effect" and e.get("cause") != "other_actor"]
    by_hand = [e for e in events if e["lane"] == "remote" and e["kind"] == "effect" and e.get("cause") == "other_actor"]
    acks = sum(1 for e in events if e["lane"] == "world" and e["kind"] == "deliver"
               and (e.get("event") or {}).get("type") == "callback")
    finish = [e for e in events if e["lane"] == "run" and e["kind"] == "finish" and e.get("accepted")]
    disposition = finish[-1]["disposition"] if finish else None
    escalations = sum(1 for e in events if e["lane"] == "run" and e["kind"] == "escalation")
    waits = sum(1 for e in events if e["lane"] == "run" and e["kind"] == "approval_requested")
    unsafe = sorted({v.invariant for v in verdict.violations if v.invariant in SAFETY})
    return {"profile": profile if isinstance(profile, str) else scenario.id,
            "effects": f"{len(effects)} by the agent" + (f", {len(by_hand)} by hand" if by_hand else ""),
            "evidence": f"{acks} acknowledgement(s)" if acks else "none beyond the caller's view",
            "correct": "yes" if len(effects) <= 1 and not unsafe else "no: " + ", ".join(unsafe or ["duplicate"]),
            "authority": "human" if disposition == "WAITING_HUMAN" and not effects else "agent",
            "latency": ("waits for a human" if disposition == "WAITING_HUMAN"
                        else format_time(finish[-1]["t"], origin) if finish else "-"),
            "burden": f"{escalations} escalation(s), {waits} human step(s)",
            "ambiguity": ("hidden by an unsafe retry" if unsafe
                          else "effect unknown" if disposition and "UNKNOWN" in disposition
                          else "with the person who executes it" if disposition == "WAITING_HUMAN" else "none"),
            "disposition": disposition, "unsafe": unsafe}


def table(rows: list[tuple[str, dict]]) -> str:
    head = ("option", "design", "effect correct", "effects", "evidence", "authority", "finished",
            "operational burden", "remaining ambiguity")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for design, m in rows:
        lines.append(" | ".join(str(x) for x in (m["profile"], design, m["correct"], m["effects"], m["evidence"],
                                                  m["authority"], m["latency"], m["burden"], m["ambiguity"])))
    return "\n".join(lines)


def safe_designs(profile: str) -> Expected:
    ok = sorted(d for d, spec in DESIGNS.items() if not measure(profile, spec)["unsafe"])
    shown = "reconcile_or_escalate" if "reconcile_or_escalate" in ok else (ok[0] if ok else None)
    return Expected(mode="one_of", accepted=frozenset(ok), shown=shown)


def unambiguous_options() -> Expected:
    spec = DESIGNS["reconcile_or_escalate"]
    ok = sorted(p for p in PROFILES if p != "as_is" and measure(p, spec)["ambiguity"] != "effect unknown")
    return Expected(mode="exact", accepted=frozenset(ok), shown=ok)


# --------------------------------------------------------------------------- the learner's own options
OPTIONS = "options.yaml"
#: What an option may change: the service's capabilities (the scenario knobs of docs/scenarios.md),
#: who executes the effect, and the design the agent runs.
KNOBS = {"idempotency": ("none", "semantic"), "lookup": ("none", "by_key")}
EXECUTES = ("agent", "human")
FIELDS = ("name", "service", "acknowledgements", "executes", "design")
#: The chapter's three bounded options, as options (reveal shows them measured).
MODEL_OPTIONS = (
    {"name": "human-executed-proposal", "service": {"idempotency": "none", "lookup": "none"},
     "acknowledgements": "no", "executes": "human", "design": "reconcile_or_escalate"},
    {"name": "service-owned-command", "service": {"idempotency": "semantic", "lookup": "by_key"},
     "acknowledgements": "no", "executes": "agent", "design": "reconcile_or_escalate"},
    {"name": "durable-outbox-with-acks", "service": {"idempotency": "none", "lookup": "none"},
     "acknowledgements": "yes", "executes": "agent", "design": "reconcile_or_escalate"},
)


def blank_options() -> str:
    one = ["  - name: ~                      # your name for it",
           "    service: {idempotency: none, lookup: none}   # idempotency: none | semantic; lookup: none | by_key",
           "    acknowledgements: no         # yes: the service acknowledges each commit (a completion callback)",
           "    executes: agent              # agent | human (the agent returns a proposal a person carries out)",
           "    design: ~                    # the agent's design: " + ", ".join(DESIGNS)]
    return "\n".join(["# Propose three bounded options for the weak service (the chapter: \"Ask learners to",
                      "# propose three bounded options.\"). Each changes what the service offers, who executes",
                      "# the reservation, or both, and names the design the agent runs. `crashlab workshop check",
                      "# weak-service` runs each on the same fault (the first response is lost) and measures it",
                      "# on the five criteria.", "options:", *one, *one, *one]) + "\n"


def read_options(path: Path) -> list[dict]:
    """The learner's options; UsageError naming the file, line and field."""
    from ..vocab.errors import UsageError
    from ..scenario.yaml import parse_yaml

    try:
        doc = parse_yaml(Path(path).read_text(encoding="utf-8"), file=str(path))
    except FileNotFoundError:
        raise UsageError(f"{path}: no options here; run `crashlab workshop start weak-service` again") from None
    except Exception as exc:  # noqa: BLE001 - YAML and line-loader errors
        raise UsageError(f"{path}: not valid YAML ({getattr(exc, 'problem', exc)})") from None

    def fail(container, key, message):
        line = container.lines.get(key) if isinstance(getattr(container, "lines", None), dict) else None
        raise UsageError(f"{path}{':' + str(line) if line else ''}: field '{key}': {message}")

    if not isinstance(doc, dict) or not isinstance(doc.get("options"), list):
        raise UsageError(f"{path}: the file holds 'options:', a list of three options as the template shows")
    out = []
    for i, opt in enumerate(doc["options"]):
        if not isinstance(opt, dict):
            fail(doc, "options", f"option {i + 1} is not a mapping")
        if all(opt.get(k) is None for k in ("name", "design")):
            continue                                    # still blank
        for key in opt:
            if key not in FIELDS:
                fail(opt, key, f"not an option field ({', '.join(FIELDS)})")
        service = opt.get("service") or {}
        if not isinstance(service, dict):
            fail(opt, "service", "a mapping such as {idempotency: semantic, lookup: by_key}")
        for knob, value in service.items():
            if knob not in KNOBS:
                fail(service, knob, f"not a service knob here ({', '.join(KNOBS)})")
            if value not in KNOBS[knob]:
                fail(service, knob, f"{value!r} is not one of {', '.join(KNOBS[knob])}")
        acks = {True: "yes", False: "no", None: "no"}.get(opt.get("acknowledgements"), opt.get("acknowledgements"))
        if acks not in ("yes", "no"):
            fail(opt, "acknowledgements", "yes or no")
        if (opt.get("executes") or "agent") not in EXECUTES:
            fail(opt, "executes", f"{opt.get('executes')!r} is not one of {', '.join(EXECUTES)}")
        if opt.get("design") not in DESIGNS:
            fail(opt, "design", f"{opt.get('design')!r} is not one of {', '.join(DESIGNS)}")
        out.append({"name": str(opt.get("name") or f"option {i + 1}"),
                    "service": {k: service.get(k, "none") for k in KNOBS}, "acknowledgements": acks,
                    "executes": opt.get("executes") or "agent", "design": opt["design"]})
    return out


def option_doc(option: dict) -> dict:
    """The scenario an option stands for: the weak service's fault, the option's capabilities."""
    import copy

    import yaml

    doc = copy.deepcopy(yaml.safe_load((E.DATA / "scenarios" / "weak-as-is.yaml").read_text(encoding="utf-8")))
    doc["id"] = "weak-option"
    doc["title"] = f"Weak service, an option: {option['name']}"
    service = dict(option["service"])
    if option["acknowledgements"] == "yes":
        service["callback_delay"] = "30s"
    doc["services"]["reservation"] = service
    if option["executes"] == "human":
        run = doc["runs"][0]
        run["approval"] = {"mode": "manual"}      # the agent returns the proposal; it holds no capability
        doc.setdefault("events", []).append(      # the person carries it out once, by hand
            {"at": "10:05", "type": "other_actor", "service": "reservation", "op": "reserve",
             "args": {"key": "by-hand-1", "intent": dict(run["intent"])}})
    return doc


def measure_option(option: dict) -> dict:
    from ..scenario.loader import from_dict

    m = measure(from_dict(option_doc(option), file=option["name"]), DESIGNS[option["design"]])
    return {**m, "profile": option["name"]}


def grade_options(options: list[dict]) -> tuple[list[tuple[str, dict]], list[str]]:
    """(measured rows, what is wrong): three options, each distinct, each changing the capability
    boundary (the service or who executes), none breaking a safety invariant."""
    wrong = []
    if len(options) < 3:
        wrong.append(f"options: propose three bounded options ({len(options)} filled in)")
    seen: dict[str, str] = {}
    rows = []
    for opt in options:
        shape = repr((sorted(opt["service"].items()), opt["acknowledgements"], opt["executes"]))
        if shape in seen:
            wrong.append(f"option {opt['name']}: the same capabilities as {seen[shape]}; each option changes "
                         "something else")
        seen.setdefault(shape, opt["name"])
        if opt["executes"] == "agent" and opt["acknowledgements"] == "no" and \
                all(v == "none" for v in opt["service"].values()):
            wrong.append(f"option {opt['name']}: the service is as weak as before and the agent still executes: "
                         "(the chapter: \u201cStore the request locally and retry\u201d is not sufficient.) "
                         "Change what the service offers or who executes")
        m = measure_option(opt)
        rows.append((opt["design"], m))
        if m["unsafe"]:
            wrong.append(f"option {opt['name']}: {opt['design']} breaks {', '.join(m['unsafe'])} on this service")
    return rows, wrong

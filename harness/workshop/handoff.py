"""The handoff rehearsal: recover three runs from durable artifacts only.

``write(folder, seed)`` picks three runs from the pool (seeded), cuts each trace where the
recovering worker starts, and hands the reviewer only the durable artifacts: the checkpoint,
the ledger, the recovery matrix, the compatibility table, the checkpoint and ledger
contracts, the eight traces, and the trace up to the handoff. The reviewer fills
``plan.yaml`` (actions from a closed vocabulary, final disposition, next owner) for each
run. ``grade`` judges it against the permitted dispositions and the required and prohibited
steps of each run (data/answers.yaml, ``handoff``); ``compare`` sets two reviewers' plans side
by side and names every disagreement.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from ..vocab.errors import UsageError
from ..scenario.yaml import parse_yaml
from ..world.trace import write_jsonl
from . import evidence as E
from .keys import REFERENCE, _answers
from .ladder import TRACE_LABELS, vocab

PLAN = "plan.yaml"
ACTIONS = ("acquire_new_epoch", "preserve_cancellation", "query_semantic_key", "query_compensation_key",
           "compare_intent_fields", "replay_recorded_result", "migrate_checkpoint", "pin_old_code",
           "communicate_manually", "preserve_both_histories", "escalate_to_operator", "dispatch_again",
           "dispatch_new_key", "compensate_again", "edit_ledger", "refresh_approval")
#: Why each prohibited action is prohibited: the chapter's sentence (a kit's check names the step).
WHY_PROHIBITED = {
    "dispatch_again": "Blind retry can duplicate a non-idempotent action.",
    "dispatch_new_key": "minting a new key for an unchanged retry could duplicate it.",
    "compensate_again": "A compensation request can itself time out after commit, creating another ambiguous effect.",
    "edit_ledger": "A human can provide evidence or exercise authorized override, but direct ledger editing "
                   "destroys traceability.",
    "refresh_approval": "A design that passes each single fault can still fail when cancellation is applied after "
                        "a stale worker resumes or when migration accidentally refreshes old authority.",
}
MISSING = ("which_read_is_authoritative", "key_retention", "late_callback_policy", "compensation_authority",
           "owner_after_deadline", "none")


def pool() -> dict[str, dict]:
    return _answers()["handoff"]


def pick(seed: int) -> list[str]:
    """Three runs of the pool, chosen and ordered by the seed."""
    return random.Random(seed).sample(sorted(pool()), 3)


def cut(events: list[dict]) -> int:
    """The handoff point: the start of the worker whose finish the platform accepted."""
    finish = [e for e in events if e["lane"] == "run" and e["kind"] == "finish" and e.get("accepted")][-1]
    start = next(e for e in events if e["lane"] == "worker" and e["kind"] == "start"
                 and e["worker"] == finish["worker"])
    return start["seq"]


def durable(ev: dict) -> bool:
    """What a reviewer could know after the fact: not the services' ground truth (the remote
    lane, injected transport faults, other actors) and not a result no worker ever saw."""
    if ev["lane"] == "remote":
        return False
    if ev["lane"] == "fault":
        return ev["kind"] in ("crash", "pause", "resume")
    if ev["lane"] == "world":
        return ev["kind"] != "other_actor"
    if ev["lane"] == "port" and ev["kind"] == "result":
        return ev.get("delivered", True)
    return True


def artifacts(events: list[dict], label: str) -> dict:
    """What survives to the handoff: checkpoint, ledger, and the sanitized trace so far."""
    point = cut(events)
    before = [e for e in events if e["seq"] < point]
    checkpoints = [e for e in before if e["lane"] == "run" and e["kind"] == "checkpoint"]
    ledger: dict[str, dict] = {}
    for e in before:
        if e["lane"] == "knowledge":
            ledger[e["key"]] = e["entry"]
    trace = E.sanitize([e for e in before if durable(e)], "anonymous")
    head = {k: v for k, v in trace[0].items() if k not in ("title", "source", "tags", "expect")}
    head["scenario"] = f"handoff-run-{label}"
    return {"checkpoint": checkpoints[-1]["checkpoint"] if checkpoints else None,
            "ledger": list(ledger.values()), "trace": [head, *trace[1:]], "handoff_seq": point}


def _matrix_markdown() -> str:
    from crashlab.reference_impl.matrix import ROWS

    lines = ["# Recovery matrix", "", "| row | trigger | evidence | action | reconciliation read | escalation | terminal |",
             "|---|---|---|---|---|---|---|"]
    for r in ROWS:
        lines.append(f"| {r.name} | {r.trigger} | {r.evidence} | {r.action.value} | {r.reconciliation_read} "
                     f"| {r.escalation or '-'} | {r.terminal} |")
    return "\n".join(lines) + "\n"


def _compatibility_markdown() -> str:
    from crashlab.reference_impl.migrations import IMPLEMENTED, MIGRATIONS

    lines = ["# Compatibility table", "", "| axis | versions this code executes |", "|---|---|"]
    lines += [f"| {axis} | {', '.join(map(str, v))} |" for axis, v in IMPLEMENTED.items()]
    lines += ["", "Tested migrations (anything else: pin or stop):", ""]
    lines += [f"- {axis}: {a} -> {b}" for axis, a, b in MIGRATIONS]
    return "\n".join(lines) + "\n"


def _contracts_markdown() -> str:
    from ..vocab.model import CHECKPOINT_FIELDS, EFFECT_ENTRY_FIELDS

    def table(fields):
        return [f"| `{f.path}` | {'/'.join(t.__name__ for t in f.types)} | {'yes' if f.required else 'no'} |"
                for f in fields]

    return "\n".join(["# Checkpoint and ledger contracts", "", "## Checkpoint", "", "| field | type | required |",
                      "|---|---|---|", *table(CHECKPOINT_FIELDS), "", "## Effect ledger entry", "",
                      "| field | type | required |", "|---|---|---|", *table(EFFECT_ENTRY_FIELDS)]) + "\n"


def blank_plan(seed: int, adapter: str | None = None) -> str:
    lines = ["# yaml-language-server: $schema=plan.schema.json",
             "# Your recovery plan for each run: actions (from vocab.md), the final disposition the",
             "# evidence will permit, and who acts next. missing_information is not graded: it records",
             "# what you had to ask for (compare shows it). Where the answer depends on a read, write",
             "# disposition (and next_owner) per outcome, e.g. {found: X, absent: Y, unavailable: Z}.",
             f"seed: {seed}"] + ([f"adapter: {adapter}"] if adapter else []) + ["reviewer: ~", "runs:"]
    for label in TRACE_LABELS[:3]:
        lines += [f"  {label}:", "    actions: ~", "    disposition: ~", "    next_owner: ~",
                  "    missing_information: ~"]
    return "\n".join(lines) + "\n"


def plan_schema() -> dict:
    def either(values):   # one value, or one per read outcome
        return {"oneOf": [{"enum": [*values, None]},
                          {"type": "object", "additionalProperties": False, "minProperties": 1,
                           "properties": {o: {"enum": list(values)} for o in vocab("outcomes")}}]}

    run = {"type": "object", "additionalProperties": False, "properties": {
        "actions": {"type": ["array", "null"], "items": {"enum": list(ACTIONS)}, "uniqueItems": True},
        "disposition": either(vocab("disposition")),
        "next_owner": either(vocab("next_owner")),
        "missing_information": {"type": ["array", "null"], "items": {"enum": list(MISSING)}}}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "crashlab handoff plan",
            "type": "object", "required": ["seed", "runs"], "additionalProperties": False,
            "properties": {"seed": {"type": "integer"}, "reviewer": {"type": ["string", "null"]},
                           "adapter": {"type": "string"},
                           "runs": {"type": "object", "additionalProperties": False,
                                    "properties": {label: run for label in TRACE_LABELS[:3]}}}}


def write(folder: Path, seed: int, adapter: str | None = None) -> list[str]:
    """The rehearsal's artifacts for ``seed``: the runs as ``adapter`` (default: the reference
    design) left them, so a team repeats the rehearsal on its own adapter."""
    if (folder / PLAN).exists():
        existing = read_plan(folder / PLAN)
        if existing["seed"] != seed:
            raise UsageError(f"{folder / PLAN}: this folder holds a plan for seed {existing['seed']}; "
                             f"give another --dir for seed {seed}")
        if existing.get("adapter") != adapter:
            raise UsageError(f"{folder / PLAN}: this folder holds a plan for the runs of "
                             f"{existing.get('adapter') or 'the reference design'}; give another --dir")
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    listings = []
    for label, name in zip(TRACE_LABELS, pick(seed)):
        art = artifacts(E.trace(name, adapter or REFERENCE), label)
        run_dir = folder / f"run-{label}"
        run_dir.mkdir(exist_ok=True)
        (run_dir / "checkpoint.json").write_text(json.dumps(art["checkpoint"], indent=2, sort_keys=True) + "\n")
        (run_dir / "ledger.json").write_text(json.dumps(art["ledger"], indent=2, sort_keys=True) + "\n")
        write_jsonl(art["trace"], run_dir / "trace-until-handoff.jsonl")
        (run_dir / "listing.txt").write_text(E.listing(art["trace"]))
        listings.append((f"run {label}: checkpoint", json.dumps(art["checkpoint"], indent=2, sort_keys=True)))
        listings.append((f"run {label}: ledger", json.dumps(art["ledger"], indent=2, sort_keys=True)))
        listings.append((f"run {label}: the trace up to the handoff", E.listing(art["trace"])))
        files += [f"run-{label}/{f}" for f in ("checkpoint.json", "ledger.json", "trace-until-handoff.jsonl",
                                               "listing.txt")]
    eight = folder / "eight-traces"
    eight.mkdir(exist_ok=True)
    from .ladder import rung
    for i in range(1, 9):
        name = rung(f"t{i}").scenario            # the eight traces as the ladder shows them
        (eight / f"{name.removeprefix('workshop-')}.txt").write_text(E.listing(E.sanitize(E.trace(name, REFERENCE))))
    files.append("eight-traces/")
    for fname, text in (("recovery-matrix.md", _matrix_markdown()), ("compatibility.md", _compatibility_markdown()),
                        ("contracts.md", _contracts_markdown()),
                        ("vocab.md", vocab_markdown()),
                        ("plan.schema.json", json.dumps(plan_schema(), indent=2) + "\n")):
        (folder / fname).write_text(text)
        files.append(fname)
    if not (folder / PLAN).exists():
        (folder / PLAN).write_text(blank_plan(seed, adapter))
    files.append(PLAN)
    from .kit import handout_html
    from .ladder import rung
    (folder / "handout.html").write_text(handout_html(rung("handoff"), listings, blank_plan(seed, adapter), None,
                                                      vocab_markdown()), encoding="utf-8")
    files.append("handout.html")
    return files


def vocab_markdown() -> str:
    return "# Vocabularies\n\n" + "\n".join(
        ["- **actions**: " + ", ".join(f"`{a}`" for a in ACTIONS),
         "- **disposition**: " + ", ".join(f"`{d}`" for d in vocab("disposition")),
         "- **next_owner**: " + ", ".join(f"`{d}`" for d in vocab("next_owner")),
         "- **missing_information**: " + ", ".join(f"`{d}`" for d in MISSING),
         "- **read outcomes** (the branches of a conditional disposition or next owner): "
         + ", ".join(f"`{d}`" for d in vocab("outcomes"))]) + "\n"


# --------------------------------------------------------------------------- reading, grading, comparing
def read_plan(path: Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / PLAN
    try:
        doc = parse_yaml(path.read_text(encoding="utf-8"), file=str(path))
    except FileNotFoundError:
        raise UsageError(f"{path}: no plan here; `crashlab workshop handoff --seed N` writes one") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UsageError(f"{path}{':' + str(mark.line + 1) if mark else ''}: not valid YAML") from None
    def fail(container, key, message):
        line = container.lines.get(key) if hasattr(container, "lines") else None
        raise UsageError(f"{path}{':' + str(line) if line else ''}: field '{key}': {message}")

    if isinstance(doc, dict):
        for key in doc:
            if key in TRACE_LABELS[:3] or key in ("actions", "disposition", "next_owner", "missing_information"):
                fail(doc, key, "this is at the top level; indent it under 'runs:' as the template shows")
    if not isinstance(doc, dict) or not isinstance(doc.get("seed"), int) or not isinstance(doc.get("runs"), dict):
        raise UsageError(f"{path}: a plan has 'seed' (a number) and 'runs' (A, B, C)")
    for run in doc["runs"].values():
        if isinstance(run, dict):
            for field in ("actions", "missing_information"):   # one value written bare, as `none`
                if run.get(field) is not None and not isinstance(run[field], list):
                    run[field] = [run[field]]

    for label, run in doc["runs"].items():
        if label not in TRACE_LABELS[:3]:
            fail(doc["runs"], label, "the runs are A, B and C")
        if not isinstance(run, dict):
            fail(doc["runs"], label, "give actions, disposition and next_owner")
        for field, allowed in (("actions", ACTIONS), ("missing_information", MISSING)):
            for value in run.get(field) or []:
                if value not in allowed:
                    fail(run, field, f"{value!r} is not in the vocabulary (vocab.md)")
        for field, allowed in (("disposition", vocab("disposition")), ("next_owner", vocab("next_owner"))):
            value = run.get(field)
            if isinstance(value, dict):      # conditional: one value per read outcome
                if not value:
                    fail(run, field, "give one value per read outcome, e.g. {found: ..., absent: ...}")
                for outcome, v in value.items():
                    if outcome not in vocab("outcomes"):
                        fail(value, outcome, f"{outcome!r} is not a read outcome ({', '.join(vocab('outcomes'))})")
                    if v not in allowed:
                        fail(value, outcome, f"{v!r} is not in the vocabulary (vocab.md)")
            elif value is not None and value not in allowed:
                fail(run, field, f"{value!r} is not in the vocabulary (vocab.md)")
    return doc


def grade(plan: dict) -> tuple[list[str], list[str]]:
    """(passed, wrong): per run, never naming the permitted values."""
    passed, wrong = [], []
    for label, name in zip(TRACE_LABELS, pick(plan["seed"])):
        key = pool()[name]
        run = plan["runs"].get(label) or {}
        actions = set(run.get("actions") or [])
        problems = []
        problems += _branches(run.get("disposition"), key["dispositions"], "the disposition",
                              "is not one the evidence permits")
        problems += _branches(run.get("next_owner"), key["next_owner"], "the next owner", "is not right")
        if isinstance(run.get("disposition"), dict):
            problems += [f"the disposition if the read says {o} does not state what that read shows"
                         for o, d in run["disposition"].items() if not _truthful(o, d)]
        if any(not actions & set(group) for group in key["required"]):
            problems.append("the actions miss a required step")
        for step in sorted(actions & set(key["prohibited"])):
            problems.append(f"the actions include the prohibited step {step}: the chapter: "
                            f"\"{WHY_PROHIBITED[step]}\"")
        if problems:
            wrong += [f"run {label}: {p}" for p in problems]
        else:
            passed.append(f"run {label}")
    return passed, wrong


def _branches(value, permitted, what: str, wrong: str) -> list[str]:
    """A plain value, or a conditional one (read outcome -> value): every branch permitted."""
    if isinstance(value, dict):
        return [f"{what} if the read says {o} {wrong}" for o, v in value.items() if v not in permitted]
    return [] if value in permitted else [f"{what} {wrong}"]


#: What a disposition may say after each read outcome: found is an effect, absent is none, the
#: rest leave it unknown (or wait for someone who can find out).
_TRUTHFUL = {"found": ("SUCCEEDED", "EFFECT_REMAINS", "WAITING_"), "absent": ("NO_EFFECT", "WAITING_"),
             "unavailable": ("UNKNOWN", "WAITING_"), "conflict": ("UNKNOWN", "WAITING_"),
             "in_flight": ("UNKNOWN", "WAITING_")}


def _truthful(outcome: str, disposition: str) -> bool:
    return any(part in disposition for part in _TRUTHFUL.get(outcome, ("",)))


def _shown(value) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{o}: {v}" for o, v in sorted(value.items()))
    return ", ".join(value) if isinstance(value, list) else str(value)


def compare(a: dict, b: dict, name_a: str, name_b: str) -> tuple[list[str], int]:
    """Side by side; -> (lines, number of disagreements)."""
    if a["seed"] != b["seed"]:
        raise UsageError(f"the plans recover different runs (seed {a['seed']} and {b['seed']}); "
                         "compare plans written for the same --seed")
    if a.get("adapter") != b.get("adapter"):
        raise UsageError("the plans recover the runs of different adapters; compare plans written for the "
                         "same --seed and --adapter")
    lines = [f"{'run':<4} {'field':<20} {name_a:<32} {name_b:<32}"]
    disagreements = 0
    gaps = 0
    for label in TRACE_LABELS[:3]:
        ra, rb = a["runs"].get(label) or {}, b["runs"].get(label) or {}
        for field in ("disposition", "next_owner", "actions", "missing_information"):
            va, vb = ra.get(field), rb.get(field)
            if field in ("actions", "missing_information"):
                va, vb = sorted(va or []), sorted(vb or [])
            same = va == vb
            note = "" if same else "<- differs" + (" (not graded)" if field == "missing_information" else "")
            lines.append(f"{label:<4} {field:<20} {_shown(va):<32} {_shown(vb):<32} {note}")
            if not same and field == "missing_information":
                gaps += 1
            elif not same:
                disagreements += 1
                if field == "actions":
                    only_a, only_b = sorted(set(va) - set(vb)), sorted(set(vb) - set(va))
                    lines.append(f"     only {name_a}: {', '.join(only_a) or '-'}; only {name_b}: {', '.join(only_b) or '-'}")
    _, wrong_a = grade(a)
    _, wrong_b = grade(b)
    lines.append(f"{disagreements} disagreement(s) in disposition, next owner or actions"
                 + (f"; {gaps} run(s) where the missing information differs (not graded)" if gaps else "")
                 + (": each is an underspecified contract or a policy decision that needs an owner; resolve "
                    "it with the service or domain owner, do not average the decisions" if disagreements else ""))
    for name, wrong in ((name_a, wrong_a), (name_b, wrong_b)):
        lines += [f"{name}: {w}" for w in wrong]
    if not disagreements and not wrong_a and not wrong_b:
        lines.append("the same permitted disposition from the same evidence")
    elif not disagreements:
        lines.append("the reviewers agree, but not on what the evidence permits: agreement is not the pass")
    return lines, disagreements + len(wrong_a) + len(wrong_b)


def model_plan(seed: int, reviewer: str = "model") -> dict:
    """A plan that satisfies every run's key (for reveal and tests)."""
    runs = {}
    for label, name in zip(TRACE_LABELS, pick(seed)):
        key = pool()[name]
        runs[label] = {"actions": sorted({group[0] for group in key["required"]}),
                       "disposition": key["dispositions"][0], "next_owner": key["next_owner"][0]}
    return {"seed": seed, "reviewer": reviewer, "runs": runs}

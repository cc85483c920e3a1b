"""Every sentence crashlab writes is a claim: the communications of every run of every library
scenario, with the reference adapter and gallery adapters that lie in different ways, are
checked against the run's ledger and the services' records read here, independently of the
generator (crashlab.report.comms), by a lexicon of phrases and by the claims each sentence
declares; and none names a raw enum, shows a Python repr or has a broken template."""
from __future__ import annotations

import re
from functools import lru_cache

import pytest

from crashlab.vocab.model import Knowledge, RunState
from crashlab.report.comms import ASSERTIONS, Claim, Sentence, communications, situation
from crashlab.run.runner import run_scenario
from crashlab.scenario.loader import library

ADAPTERS = (
    "crashlab.reference_impl:ReferenceAdapter",
    "crashlab.gallery.alternatives:EscalateEveryAmbiguity",
    "crashlab.gallery.retries:BlindRetry",
    "crashlab.gallery.knowledge:ConfirmedFromSendRecord",
    "crashlab.gallery.knowledge:ExactlyOnceClaim",
    "crashlab.gallery.cancellation:CompensationAsRollback",
    "crashlab.gallery.blindspots:PacketWithoutOwner",
    "crashlab.gallery.blindspots:LedgerOverService",
)
TERMINAL = {"SUCCEEDED", "FAILED_NO_EFFECT", "FAILED_EFFECT_REMAINS", "FAILED_EFFECT_UNKNOWN",
            "CANCELLED_NO_EFFECT", "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN"}
MADE = {"CONFIRMED", "COMPENSATION_PROPOSED", "COMPENSATED"}


# --------------------------------------------------------------------------- the truth, read here
def truth(events: list[dict], run: str, disposition: str | None) -> dict:
    """The ledger's last word per key and what the services hold, from the raw events."""
    head = events[0]
    spec = next(r for r in head["runs"] if r["id"] == run)
    ledger: dict[str, dict] = {}
    commits, released, cancelled = {}, set(), False
    for ev in events:
        if ev.get("run") == run and ev["lane"] == "knowledge" and ev["kind"] == "ledger":
            ledger[ev["key"]] = {**(ev.get("entry") or {}), "knowledge": ev["knowledge"]}
        elif ev["lane"] == "remote" and ev["kind"] == "effect" and ev.get("run") == run \
                and ev.get("cause") != "other_actor":
            commits[ev["ref"]] = ev
        elif ev["lane"] == "remote" and ev["kind"] == "released":
            released.add(ev["ref"])
        elif ev.get("run") == run and ev["lane"] == "world" and ev["kind"] == "cancel":
            cancelled = True
    comp_keys = {k for k, e in ledger.items() if e.get("kind") == "compensation"}
    primary = [e for k, e in ledger.items() if k not in comp_keys
               and e.get("operation") in (None, spec.get("operation"))]
    comp = [ledger[k] for k in comp_keys]
    own = [ref for ref, ev in commits.items() if ev.get("key") not in comp_keys
           and not (ev.get("intent") or {}).get("release")]
    states = {e["knowledge"] for e in primary}
    comp_states = {e["knowledge"] for e in comp}
    last_reads = [((e.get("reconciliation") or [{}])[-1] or {}).get("code") for e in primary
                  if e["knowledge"] in MADE and e.get("reconciliation")]
    return {
        ("effect", "made"): bool(states & MADE) and bool(own),
        ("effect", "held"): bool(states & {"CONFIRMED", "COMPENSATION_PROPOSED"})
        and any(r not in released for r in own),
        ("effect", "unknown"): "SENT_UNKNOWN" in states and not states & MADE,
        ("effect", "absent"): not states & (MADE | {"SENT_UNKNOWN"}) and not own,
        ("effect", "pending"): disposition not in TERMINAL and not states & MADE,
        ("effect", "released"): bool(own) and all(r in released for r in own)
        and ("COMPENSATED" in states or bool(comp_states & {"CONFIRMED", "COMPENSATED"})),
        ("release", "unknown"): "SENT_UNKNOWN" in comp_states,
        ("release", "failed"): "REJECTED" in comp_states and not comp_states & {"CONFIRMED", "COMPENSATED"},
        ("release", "not_sent"): "PROPOSED" in comp_states,
        ("release", "done"): bool(comp_states & {"CONFIRMED", "COMPENSATED"}) or "COMPENSATED" in states,
        ("cancellation", "received"): cancelled,
        ("service", "denies"): any(code in ("released", "absent") for code in last_reads),
        ("records", "made"): bool(states & MADE),
        ("records", "absent"): not states & (MADE | {"SENT_UNKNOWN"}),
        ("records", "released"): "COMPENSATED" in states or bool(comp_states & {"CONFIRMED", "COMPENSATED"}),
    }


#: Phrases and the claim they make, whatever the sentence declares.
LEXICON = (
    (r"could not confirm whether it was made|whether it happened|confirmation .* was lost", ("effect", "unknown")),
    (r"(?<!records show )your [\w ]+ (was made|is in place|is still in place)", ("effect", "made")),
    (r"is (still )?in place", ("effect", "held")),
    (r"^Your [\w ]+ (was not made|was not completed)|cancelled before it was made", ("effect", "absent")),
    (r"has not been made yet", ("effect", "pending")),
    (r"has since been released", ("effect", "released")),
    (r"whether the release took effect|whether the [\w ]+ has been released", ("release", "unknown")),
    (r"releasing it did not succeed", ("release", "failed")),
    (r"release has not been sent", ("release", "not_sent")),
    (r"received your cancellation|[Cc]ancellation received", ("cancellation", "received")),
    (r"now reports it as|authoritative read says", ("service", "denies")),
    (r"[Oo]ur records show your [\w ]+ as made|ledger (says|records) the effect (was|as) made", ("records", "made")),
    (r"[Oo]ur records show that your [\w ]+ was not made", ("records", "absent")),
)
BROKEN = (r"\bNone\b", r"\{'", r"\['", r"<[a-z/]", r"\bKnowledge\.", r"\bRunState\.", r"\(\)", r"  ", r" \.",
          r"\.\.(?!\.)", r",\.", r"\bYour the\b", r"\bthe the\b", r"\b[Nn]ot named now\b", r"requested action",
          r"\b[A-Z][a-z]+_[a-z_]+\b", r"×1\b", r"\bat -?\d+\b(?!:)", r"^\s*$")
RAW_SNAKE = r"(?<![./\w(])[a-z]+_[a-z_]+\b(?!\.\w|[/(\w-])"
RAW_CAPS = r"\b[A-Z]{2,}(?:_[A-Z]+)+\b|\b(?:" + "|".join(s.value for s in (*RunState, *Knowledge)) + r")\b"


def problems(audience: str, sentence: Sentence, facts: dict) -> list[str]:
    """Everything wrong with one sentence, given the truth."""
    text = sentence.text
    out = [f"broken template /{p}/" for p in BROKEN if re.search(p, text)]
    if re.search(RAW_SNAKE, text):
        out.append(f"raw enum {re.search(RAW_SNAKE, text)[0]!r}")
    if audience == "user":
        if re.search(RAW_CAPS, text):
            out.append(f"state name for a user {re.search(RAW_CAPS, text)[0]!r}")
        if re.search(r"-v\d-|run-\d", text):
            out.append("an identifier for a user")
        if not text[:1].isupper() or not text.endswith("."):
            out.append("not a sentence")
    claims = set(sentence.claims) | {Claim(*c) for p, c in LEXICON if re.search(p, text)}
    for c in claims:
        if (c.about, c.asserts) not in ASSERTIONS:
            out.append(f"unknown claim {c}")
        elif not facts[(c.about, c.asserts)]:
            out.append(f"false claim {c.about} {c.asserts}")
    return out


def check(events: list[dict], run: str, disposition: str | None, packet) -> list[str]:
    facts = truth(events, run, disposition)
    s = situation(run, disposition, packet, events, int(events[0].get("origin_ms") or 0))
    bad = []
    for audience, sentences in communications(s).items():
        for sentence in sentences:
            bad += [f"{audience}: {p}: {sentence.text!r}" for p in problems(audience, sentence, facts)]
    return bad


@lru_cache(maxsize=None)
def _library():
    return tuple(library())


def _runs(events: list[dict]):
    finishes: dict[str, str] = {}
    packets: dict[str, dict] = {}
    for ev in events:
        if ev["lane"] == "run" and ev["kind"] == "finish" and ev.get("accepted"):
            finishes[ev["run"]] = ev["disposition"]
        if ev["lane"] == "run" and ev["kind"] in ("escalation", "finish") and isinstance(ev.get("packet"), dict):
            packets[ev["run"]] = ev["packet"]
    for spec in events[0]["runs"]:
        yield spec["id"], finishes.get(spec["id"]), packets.get(spec["id"])


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_no_generated_sentence_contradicts_the_records(adapter):
    bad = []
    for sc in _library():
        events = run_scenario(sc, adapter, None).events
        for run, disposition, packet in _runs(events):
            bad += [f"{sc.id} {run}: {p}" for p in check(events, run, disposition, packet)]
    assert not bad, "\n".join(bad[:30])


# --------------------------------------------------------------------------- the checker catches
@lru_cache(maxsize=None)
def _trace(scenario_id: str) -> list[dict]:
    sc = next(s for s in _library() if s.id == scenario_id)
    return run_scenario(sc, "crashlab.reference_impl:ReferenceAdapter", None).events


@pytest.mark.parametrize("scenario, disposition, audience, text", [
    # the hold was confirmed, the *release* is unknown
    ("t8-compensation-failure", "CANCELLED_EFFECT_UNKNOWN", "user",
     "The confirmation for your inventory hold was lost, so we do not yet know whether it happened."),
    ("handoff-3-release-undetermined", "CANCELLED_EFFECT_UNKNOWN", "user",
     "The confirmation for your inventory hold was lost, so we do not yet know whether it happened."),
    ("matrix-ledger-confirmed-service-disagrees", "FAILED_EFFECT_UNKNOWN", "user",
     "Service_owner now owns the check."),
    ("matrix-ledger-confirmed-service-disagrees", "FAILED_EFFECT_UNKNOWN", "user",
     "Your inventory hold is in place."),
    ("matrix-policy-change-deployment", "SUCCEEDED", "user",
     "Your the requested action was not completed. Not named now owns the check."),
    ("matrix-policy-change-deployment", "SUCCEEDED", "operator", "Next owner: None."),
    ("matrix-policy-change-deployment", "SUCCEEDED", "operator", "Goal: {'part': 'P-204'}."),
    ("matrix-policy-change-deployment", "SUCCEEDED", "operator", "Next owner: service_owner."),
    ("matrix-policy-change-deployment", "SUCCEEDED", "user", "Your run ended SUCCEEDED."),
    ("t2-commit-before-record", "SUCCEEDED", "user", "We received your cancellation."),
    ("t2-commit-before-record", "SUCCEEDED", "user", "Your inventory hold was not made."),
])
def test_the_checker_catches_a_false_or_broken_sentence(scenario, disposition, audience, text):
    events = _trace(scenario)
    facts = truth(events, "run-82", disposition)
    assert problems(audience, Sentence(text), facts)


def test_a_declared_claim_is_checked_too():
    events = _trace("t2-commit-before-record")
    facts = truth(events, "run-82", "SUCCEEDED")
    assert problems("user", Sentence("All is well.", (Claim("effect", "unknown"),)), facts)
    assert not problems("user", Sentence("Your inventory hold is in place."), facts)


def test_the_issue_cases_read_as_the_records_say():
    t8 = _trace("t8-compensation-failure")
    user = " ".join(x.text for x in communications(situation("run-82", "CANCELLED_EFFECT_UNKNOWN", None, t8, 0))["user"])
    assert "was made" in user and "whether the release took effect" in user and "was lost" not in user
    disagree = _trace("matrix-ledger-confirmed-service-disagrees")
    s = situation("run-82", "FAILED_EFFECT_UNKNOWN", None, disagree, 0)
    user = " ".join(x.text for x in communications(s)["user"])
    assert "reports it as released" in user and "service's owner now owns the check" in user
    assert s.hindsight and "another actor" in s.hindsight[0]
    ok = _trace("matrix-policy-change-deployment")
    s = situation("run-82", "SUCCEEDED", None, ok, 0)
    assert [x.text for x in communications(s)["user"]] == ["Your inventory hold is in place."]


def test_packet_sections_show_no_repr_and_a_resolved_run_no_missing_panel():
    """The packet sections of every library scenario's page (reference adapter): no Python
    repr or None anywhere, and a run that ended resolved is not laid out as a decision whose
    panels are missing."""
    from html import unescape

    from crashlab.run.conformance import check_run
    from crashlab.report.html import packets_html
    from crashlab.report.view import Item, unresolved

    seen_resolved = 0
    for sc in _library():
        run = run_scenario(sc, "crashlab.reference_impl:ReferenceAdapter", None)
        item = Item(result=check_run(run), events=run.events, name=sc.id)
        page = unescape(re.sub(r"<[^>]+>", " ", packets_html(item, int(run.events[0].get("origin_ms") or 0))))
        for pattern in (r"\bNone\b", r"\{'", r"\['", r"Your the\b", r"Not named\b"):
            assert not re.search(pattern, page), (sc.id, pattern, page[:400])
        if page and not unresolved(item):
            seen_resolved += 1
            assert "missing from the packet" not in page, sc.id
            # "nothing to decide" only where no ledger entry is unresolved (test_claims checks the fact)
            assert ("nothing to decide" in page) != ("the ledger still holds" in page), sc.id
    assert seen_resolved       # matrix-policy-change-deployment parks PINNED with a packet, then succeeds


def test_an_owner_named_by_the_design_is_written_as_named():
    """A next owner that is the design's own identifier ('fieldops-operator') is never capitalized into
    another word at the start of a sentence."""
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent.parent / "calibration" / "stranger"
    sys.path.insert(0, str(here))
    try:
        sc = next(s for s in _library() if s.id == "matrix-weak-service")
        events = run_scenario(sc, "stranger_adapter:StrangerAdapter", None).events
    finally:
        sys.path.remove(str(here))
    finish = next(e for e in events if e.get("kind") == "finish" and e.get("accepted"))
    origin = events[0]["origin_ms"]
    packets = [e.get("packet") for e in events if e.get("kind") == "escalation"]
    s = situation("run-82", finish["disposition"], packets[-1] if packets else None, events, origin)
    text = " ".join(x.text for x in communications(s)["user"])
    assert "The owner fieldops-operator now owns the check." in text, text
    assert "Fieldops-operator" not in text

"""A decision packet's actions are judged by the allowlisted control each is, not by a closed list
of names (harness/checks/controls.py; PKT-01, PKT-02; docs/adapters.md, "The operator's controls").

AR-08 "Operate the recovery system" lists the controls by what they do; a design may call them by
the chapter's own words (VERIFY_DELIVERY, MIGRATE_OR_PIN) or declare what an action of its own name
does. What stays illegal is what the recorded state forbids: a resend while an effect is
unresolved, a generic state edit, a new key.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "checks"))
sys.path.insert(0, str(Path(__file__).parent / "data" / "designs"))

from checks_traces import TraceBuilder  # noqa: E402

from crashlab.checks import check_trace  # noqa: E402
from crashlab.checks.controls import ALLOWED, BY_ID, CONTROLS, NAMES, PRECONDITIONS, normal, resolve  # noqa: E402
from crashlab.run.conformance import run_one  # noqa: E402
from crashlab.scenario import library  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
W1 = "run-82/w1"
TIMEOUT = {"code": "timeout", "definite": False, "message": "client deadline", "details": {}}
REFERENCE = "crashlab.reference_impl:ReferenceAdapter"


def hits(res, inv_id: str) -> list[str]:
    return [v.message for v in res.violations if v.invariant == inv_id]


# --------------------------------------------------------------------------- the table
def test_common_names_map_onto_the_chapters_controls():
    assert NAMES["RECONCILE"] == ("reconciliation_read",)
    assert NAMES["COMPENSATE"] == ("approve_corrective_proposal",)
    assert {NAMES[n] for n in ("MIGRATE", "PIN", "MIGRATE_OR_PIN")} == {("migration_or_pin_runbook",)}
    assert NAMES["VERIFY_DELIVERY"] == NAMES["MARK_EXTERNAL_REFERENCE"] == ("mark_external_reference",)
    assert NAMES["STOP"] == ("cancel_new_work", "close_unresolved")
    assert NAMES["RETRY"] == ("redispatch",) and PRECONDITIONS[BY_ID["redispatch"].requires].id == "nothing_unresolved"
    assert BY_ID["edit_state"].refused and BY_ID["new_key"].refused and "edit_state" not in ALLOWED
    assert normal("migrate-or pin") == "MIGRATE_OR_PIN"
    assert resolve({"action": "verify-delivery"}).controls == ("mark_external_reference",)


def test_every_control_is_in_the_chapters_words():
    """Each control's words are the chapter's; each quote occurs in the seed text."""
    allowlisted = [c for c in CONTROLS if c.quote.startswith("An operator may")]
    assert [c.does for c in allowlisted] == ["acquire takeover", "run a specific reconciliation read",
                                             "approve a specific corrective proposal",
                                             "mark an external reference after independent verification",
                                             "cancel new work", "close with an unresolved disposition"]
    assert all(c.does in c.quote for c in allowlisted)
    seeds = Path("/work/shared/seeds")
    if not seeds.is_dir():
        pytest.skip("the seed texts are not on this machine")
    norm = lambda s: re.sub(r"\s+", " ", s.replace("\u201c", '"').replace("\u201d", '"'))  # noqa: E731
    text = norm(" ".join(p.read_text(encoding="utf-8") for p in sorted(seeds.glob("*.txt"))))
    for c in CONTROLS:
        assert norm(c.quote) in text, c.id
        assert c.section in text, c.id


def test_the_adapter_guide_lists_every_control_with_its_words_and_names():
    guide = (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")
    section = guide.split("## The operator's controls", 1)[1].split("\n## ", 1)[0]
    for c in CONTROLS:
        assert f"`{c.id}`" in section and c.does in section, c.id
        assert all(f"`{n}`" in section for n in c.names), c.id
    assert '"control"' in section


# --------------------------------------------------------------------------- PKT-02 on a trace
PACKET = {"header": {"run_id": "run-82"}, "effects": [{"semantic_key": "k-1", "knowledge": "SENT_UNKNOWN"}],
          "authority": {}, "compatibility": {}, "budget": {"deadline": None},
          "recommended": {"action": "STOP", "effect": "unknown"}, "alternatives": [], "next_owner": "operator"}


def _escalated(packet: dict, *, sent: bool = True) -> list[dict]:
    """A run whose reservation timed out (k-1 SENT_UNKNOWN), or (``sent`` False) whose effect is
    prepared and never sent (k-1 PROPOSED), escalating ``packet``."""
    b = TraceBuilder()
    if sent:
        b.clean_prefix()
        b.reserve(W1, "k-1", commit=False, error=TIMEOUT)
    else:
        b.start(W1)
        b.acquire(W1, 1)
        for state in ("VALIDATED", "PROPOSED", "APPROVED"):
            b.checkpoint(W1, state, 1)
        b.append(W1, "k-1", "PROPOSED", None, 1)
    c = b.call(W1, "operator", "escalate", packet=packet)
    b.emit("run", "escalation", worker=W1, call=c, ticket="OP-1", packet=packet)
    b.result(c, value={"ticket": "OP-1"})
    return b.end()


@pytest.mark.parametrize("recommended,alternatives", [
    ({"action": "VERIFY_DELIVERY", "semantic_key": "k-1"}, [{"action": "STOP", "effect": "unknown"}]),
    ({"action": "MIGRATE_OR_PIN", "requires": "the migration or pin runbook"}, []),
    ({"action": "ASK_PROVIDER_FOR_RECEIPT", "control": "mark_external_reference"}, []),
    ({"action": "CLOSE_UNRESOLVED", "effect": "unknown"}, [{"action": "TAKEOVER"}]),
    ({"action": "STOP", "effect": "unknown"}, [{"action": "NEW_REQUEST", "requires": "the requester"}]),
], ids=["verify-delivery", "migrate-or-pin", "declared", "close-unresolved", "unknown-alternative"])
def test_pkt_02_accepts_an_action_by_the_control_it_is(recommended, alternatives):
    res = check_trace(_escalated({**PACKET, "recommended": recommended, "alternatives": alternatives}))
    assert not hits(res, "PKT-02"), hits(res, "PKT-02")


@pytest.mark.parametrize("recommended,alternatives,sent,needle", [
    ({"action": "RETRY", "semantic_key": "k-1"}, [], True, "offers RETRY while k-1 is SENT_UNKNOWN"),
    (PACKET["recommended"], [{"action": "resend"}], True, "offers resend while k-1 is SENT_UNKNOWN"),
    ({"action": "EDIT_STATE"}, [], True, "recommends EDIT_STATE (edit state), which no packet may offer"),
    (PACKET["recommended"], [{"action": "FIX_IT", "control": "edit_state"}], True,
     "offers FIX_IT (edit state), which no packet may offer"),
    (PACKET["recommended"], [{"action": "NEW_KEY"}], True,
     "offers NEW_KEY (mint a new key for the same intent), which no packet may offer"),
    ({"action": "POKE"}, [], True, 'recommends POKE, which is no allowlisted control: use a common name (TAKEOVER, RECONCILE'),
    ({"action": "POKE", "control": "poke"}, [], True, "recommends POKE, which declares control \u201cpoke\u201d, not one of acquire_takeover"),
    ({"action": "RETRY", "control": "reconciliation_read"}, [], True,
     "recommends RETRY, which declares control reconciliation_read, but RETRY is redispatch"),
    ({"action": "VERIFY_DELIVERY"}, [], False, "recommends VERIFY_DELIVERY (mark an external reference after "
                                               "independent verification) while the ledger holds no effect that "
                                               "was sent"),
], ids=["retry-unknown", "resend-alternative", "edit-state", "declared-edit-state", "new-key", "unknown",
        "unknown-control", "relabelled-retry", "verify-nothing-sent"])
def test_pkt_02_refuses_what_the_recorded_state_or_the_chapter_forbids(recommended, alternatives, sent, needle):
    packet = {**PACKET, "recommended": recommended, "alternatives": alternatives}
    if not sent:
        packet["effects"] = [{"semantic_key": "k-1", "knowledge": "PROPOSED"}]
    found = hits(check_trace(_escalated(packet, sent=sent)), "PKT-02")
    assert found and needle in found[0], found


def test_a_resend_is_legal_once_nothing_is_unresolved():
    packet = {**PACKET, "effects": [{"semantic_key": "k-1", "knowledge": "PROPOSED"}],
              "recommended": {"action": "RETRY", "semantic_key": "k-1"}}
    assert not hits(check_trace(_escalated(packet, sent=False)), "PKT-02")


@pytest.mark.parametrize("recommended,needle", [
    ({"action": "LOOKUP_IT", "control": "reconciliation_read"}, "recommends LOOKUP_IT without naming the "
                                                                "authoritative query"),
    ({"action": "HALT", "control": "cancel_new_work"}, "recommends HALT without saying whether an effect remains"),
    ({"action": "RELEASE_IT", "control": "approve_corrective_proposal"}, "recommends RELEASE_IT while the ledger "
                                                                         "holds no confirmed effect"),
])
def test_pkt_01_judges_a_declared_control_like_its_common_name(recommended, needle):
    found = hits(check_trace(_escalated({**PACKET, "recommended": recommended})), "PKT-01")
    assert found and needle in found[0], found


# --------------------------------------------------------------------------- designs on the library
@pytest.fixture(scope="module")
def outcomes():
    """Each design's verdict and violations on every library scenario, and the actions its
    escalated packets recommend there."""
    designs = (REFERENCE, "renamed_actions:VerifyDelivery", "renamed_actions:DeclaredControl",
               "renamed_actions:StopOnIncompatible", "renamed_actions:MigrateOrPin")
    out: dict = {d: {} for d in designs}
    for sc in library():
        for d in designs:
            run, res = run_one(sc, d)
            actions = {e["packet"]["recommended"]["action"] for e in run.events
                       if e.get("kind") == "escalation" and e.get("lane") == "run"}
            out[d][sc.id] = (res.verdict, sorted((v.invariant, v.message) for v in res.violations), actions)
    return out


@pytest.mark.parametrize("design,default,action,scenarios", [
    ("renamed_actions:VerifyDelivery", REFERENCE, "VERIFY_DELIVERY",
     {"notify-crash-delivery-unknown", "matrix-weak-service", "fieldops-no-key-lookup"}),
    ("renamed_actions:DeclaredControl", REFERENCE, "ASK_PROVIDER_FOR_RECEIPT",
     {"notify-crash-delivery-unknown", "matrix-weak-service", "fieldops-no-key-lookup"}),
    ("renamed_actions:MigrateOrPin", "renamed_actions:StopOnIncompatible", "MIGRATE_OR_PIN",
     {"t5-incompatible-deployment", "matrix-incompatible-version", "combined-deploy-expired-approval",
      "matrix-policy-change-deployment", "handoff-2-confirmed-schema-change"}),
])
def test_a_design_scores_like_its_default_name(design, default, action, scenarios, outcomes):
    """The design escalates its own name where its default escalates another, and every library
    verdict and violation is its default's."""
    assert {s for s, (_, _, acts) in outcomes[design].items() if action in acts} == scenarios
    for sc, (verdict, violations, _) in outcomes[design].items():
        assert (verdict, violations) == outcomes[default][sc][:2], (sc, json.dumps(violations))
    # handoff-2: the packet the reference builds before it reads the ledger omits the confirmed key
    # (PKT-01), whatever the action's name
    assert {sc for sc in scenarios if outcomes[design][sc][0] != "pass"} <= {"handoff-2-confirmed-schema-change"}

"""The gallery of known-bad adapters: each is caught for the reason its registry names,
the correct alternatives fail no safety invariant, and the committed detection matrix is
exactly what the harness reports today (a change that weakens a check fails here)."""
from __future__ import annotations

import pytest

from crashlab.gallery import BY_ID, CATEGORIES, ENTRIES, changes, load
from crashlab.gallery.matrix import DOCS, evaluate_all, render_gallery, render_matrix
from crashlab.checks import INVARIANTS
from crashlab.checks.rubric import AUTO_FAIL_REASONS
from crashlab.reference_impl import ReferenceAdapter
from crashlab.reference_impl.behaviour import REFERENCE
from support import message_faults

MISTAKES = [e for e in ENTRIES if not e.correct]
CORRECT = [e for e in ENTRIES if e.correct]


@pytest.fixture(scope="module")
def outcomes():
    """Every adapter (the reference first) on every library scenario, once."""
    return evaluate_all()


@pytest.fixture(scope="module")
def by_name(outcomes):
    return {o.name: o for o in outcomes}


def test_the_detection_matrix_is_current(outcomes):
    assert (DOCS / "detection-matrix.md").read_text() == render_matrix(outcomes), \
        "docs/detection-matrix.md is stale: run python tools/docgen.py and review the diff"


def test_the_gallery_page_is_current(outcomes):
    assert (DOCS / "gallery.md").read_text() == render_gallery(outcomes), \
        "docs/gallery.md is stale: run python tools/docgen.py and review the diff"


def test_the_reference_is_a_clean_control(by_name):
    reference = by_name["reference"]
    assert (reference.card.total, reference.card.auto_fail) == (20, ())
    assert reference.caught() == {}, "the reference adapter must pass every scenario"


@pytest.mark.parametrize("entry", MISTAKES, ids=lambda e: e.id)
def test_each_mistake_is_caught_for_its_reason(entry, by_name):
    outcome = by_name[entry.id]
    caught = outcome.caught()
    assert [inv for inv in entry.invariants if inv not in caught] == [], caught
    assert set(entry.categories) <= set(outcome.categories())
    assert outcome.card.total < 20 and outcome.card.verdict == "fail"
    if entry.auto_fail:
        assert outcome.card.total == 0 and entry.auto_fail in outcome.card.auto_fail
    for gap in entry.gaps:   # a known gap: when a check starts raising it, move it to invariants
        assert gap not in caught


def test_the_five_automatic_failures_each_have_an_exhibit_that_scores_zero(by_name):
    for reason in AUTO_FAIL_REASONS:
        exhibits = [e for e in MISTAKES if e.auto_fail == reason]
        assert exhibits, reason
        for e in exhibits:
            assert by_name[e.id].card.total == 0 and reason in by_name[e.id].card.auto_fail


@pytest.mark.parametrize("entry", CORRECT, ids=lambda e: e.id)
def test_correct_alternatives_fail_no_safety_invariant(entry, by_name):
    outcome = by_name[entry.id]
    assert outcome.safety_violations() == {}
    # what they may lose is an expectation written for the reference's choice, nothing else
    assert [inv for inv in outcome.caught() if not inv.startswith("EXP-")] == []
    assert outcome.card.auto_fail == ()


def test_every_entry_is_the_reference_with_one_named_decision_replaced():
    assert len(BY_ID) == len(ENTRIES)
    for entry in ENTRIES:
        cls = load(entry)
        assert issubclass(cls, ReferenceAdapter) and cls.run is ReferenceAdapter.run, entry.id
        assert cls.behaviour != REFERENCE and changes(entry), entry.id


def test_registry_fields_are_well_formed():
    known = {inv.id for inv in INVARIANTS}
    for entry in ENTRIES:
        assert entry.statement.endswith(".") and ". " not in entry.statement, f"{entry.id}: one sentence"
        assert entry.quote and entry.section, entry.id
        assert set(entry.invariants) | set(entry.gaps) <= known, entry.id
        assert set(entry.categories) <= set(CATEGORIES), entry.id
        assert entry.auto_fail in (None, *AUTO_FAIL_REASONS), entry.id
        if not entry.correct:
            assert entry.invariants and entry.categories, entry.id
    assert len(CORRECT) >= 3


def test_every_message_names_the_mistake_in_plain_words(outcomes):
    """Every violation message every adapter of the gallery gets on the library: no Python repr,
    no ``None``, no raw enum, no broken punctuation or doubled word."""
    bad: dict = {}
    rendered: set = set()
    for outcome in outcomes:
        for res in outcome.results:
            for v in res.violations:
                rendered.add(v.invariant)
                for why in message_faults(v.message):
                    bad.setdefault((v.invariant, why), (outcome.name, res.id, v.message))
    assert not bad, bad
    assert {"PKT-02", "MSG-01", "LEASE-01", "DEAD-02", "DEAD-01", "CLS-03", "REC-02", "RETRY-03"} <= rendered
    two_owners = [v.message for o in outcomes for r in o.results for v in r.violations if v.invariant == "RETRY-03"]
    assert all(m.startswith("two retry owners: ") and " re-sent " in m for m in two_owners), two_owners


@pytest.mark.parametrize("message,fault", [
    ("lists k-1 as None", "None"), ("moved to RunState.SUCCEEDED", "a raw enum"),
    ("fields ['a', 'b']", "a Python repr of a list, dict or tuple"), ("the the key", "a doubled word"),
    ("sent  twice", "a double space"), ("sent twice ,then", "a space before punctuation"),
    ("names ()", "an empty value"), ("ends with:", "a dangling start or end")])
def test_the_message_check_catches_what_it_names(message, fault):
    assert fault in message_faults(message)
    assert message_faults("reservation.reserve #73 was refused definitely (refused, #75): fine") == []

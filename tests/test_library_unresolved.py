"""Situations where careful-looking designs still break a chapter rule: a notification whose
delivery is unresolved when the worker dies, a release refused with a definite validation
failure, and the situations around them the library produces on purpose. Each scenario passes
the reference and the independent designs, and the generic invariant that guards it catches the
design that gets it wrong."""
from __future__ import annotations

import pytest

import crashlab.gallery.independent as independent
import crashlab.gallery.independent.fieldops as fieldops
from crashlab.conformance import run_one
from crashlab.scenario import library


@pytest.fixture(scope="module")
def lib():
    return {sc.id: sc for sc in library()}


NEW = ["notify-crash-delivery-unknown", "fieldops-release-validation-failed"]
DESIGNS = ["crashlab.reference_impl:ReferenceAdapter", "gallery.independent:Patient",
           "gallery.independent:Brisk", "gallery.independent:Conservative"]


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("sid", NEW)
def test_correct_designs_pass_the_unresolved_situations(sid, design, lib):
    _, res = run_one(lib[sid], design)
    assert res.verdict == "pass", [(v.invariant, v.message) for v in res.violations]


class SilentDelivery(fieldops.Worker):
    """Finishes SUCCEEDED over an unresolved notification, naming no owner (the old design)."""

    def unresolved_delivery(self):
        yield from self.finish("SUCCEEDED", reason="reserved; the notification's delivery is unknown")


def test_success_over_an_unresolved_notification_without_an_owner_is_caught(lib, monkeypatch):
    monkeypatch.setattr(independent, "SilentDelivery",
                        type("SilentDelivery", (independent.IndependentAdapter,), {"worker": SilentDelivery}),
                        raising=False)
    _, res = run_one(lib["notify-crash-delivery-unknown"], "crashlab.gallery.independent:SilentDelivery")
    assert res.verdict == "fail"
    assert "OWN-04" in {v.invariant for v in res.violations}


def test_resending_a_release_refused_as_invalid_is_caught(lib, monkeypatch):
    # a design that treats validation_failed as transient re-sends the same release
    monkeypatch.setattr(fieldops, "NOT_TRANSIENT", frozenset({"permission_denied", "intent_mismatch"}))
    _, res = run_one(lib["fieldops-release-validation-failed"], "crashlab.gallery.independent:Patient")
    assert res.verdict == "fail"
    assert "CLS-01" in {v.invariant for v in res.violations}

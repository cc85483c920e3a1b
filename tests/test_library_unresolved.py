"""Situations where careful-looking designs still break a chapter rule: a notification whose
delivery is unresolved when the worker dies, a release refused with a definite validation
failure, and the situations around them the library produces on purpose. Each scenario passes
the reference and the independent designs, and the generic invariant that guards it catches the
design that gets it wrong."""
from __future__ import annotations

import sys

import pytest

import crashlab.gallery.independent as independent
import crashlab.gallery.independent.fieldops as fieldops
from crashlab.run.conformance import run_one
from crashlab.scenario import library


@pytest.fixture(scope="module")
def lib():
    return {sc.id: sc for sc in library()}


NEW = ["notify-crash-delivery-unknown", "fieldops-release-validation-failed", "matrix-intent-mismatch-own-key",
       "matrix-lag-beyond-delivery-bound", "combined-cancel-before-migration", "fieldops-crash-after-cancel-read"]
DESIGNS = ["crashlab.reference_impl:ReferenceAdapter", "gallery.independent:Patient",
           "gallery.independent:Brisk", "gallery.independent:Conservative",
           f"exec:{sys.executable} gallery/independent/fieldops.py --lease-ttl 25000 --checkpoints sparse --poll 6000"]


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


def _install(monkeypatch, name, worker):
    monkeypatch.setattr(independent, name, type(name, (independent.IndependentAdapter,), {"worker": worker}),
                        raising=False)
    return f"crashlab.gallery.independent:{name}"


class DemotesTerminal(fieldops.Worker):
    """Reads a terminal checkpoint as unfinished work, so new code demotes it to a stop."""

    def call(self, port, op, **args):
        value = yield from super().call(port, op, **args)
        if (port, op) == ("checkpoints", "load") and value.get("checkpoint"):
            value["checkpoint"]["control"]["state"] = "RECONCILING"
        return value


def test_new_code_that_demotes_a_recorded_cancelled_outcome_is_caught(lib, monkeypatch):
    _, res = run_one(lib["combined-cancel-before-migration"], _install(monkeypatch, "DemotesTerminal", DemotesTerminal))
    assert res.verdict == "fail"
    assert "TERM-01" in {v.invariant for v in res.violations}


def test_absence_read_past_the_bound_but_within_the_lag_is_caught(lib):
    _, res = run_one(lib["matrix-lag-beyond-delivery-bound"], "crashlab.gallery.knowledge:EventualNegativeAsAbsence")
    assert res.verdict == "fail"
    assert "REC-01" in {v.invariant for v in res.violations}


def test_resending_the_key_after_a_definite_intent_mismatch_is_caught(lib, monkeypatch):
    monkeypatch.setattr(fieldops, "NOT_TRANSIENT", frozenset({"validation_failed", "permission_denied"}))
    _, res = run_one(lib["matrix-intent-mismatch-own-key"], "crashlab.gallery.independent:Patient")
    assert res.verdict == "fail"
    assert "CLS-01" in {v.invariant for v in res.violations}


class ForgetsCancellation(fieldops.Worker):
    """Treats the inbox as consumed once read: a worker that dies after reading a cancellation
    loses it for every later worker."""

    def poll(self):
        yield from super().poll()
        if self.worker and str(self.worker).endswith("w3"):
            self.cancel = None


def test_a_cancellation_lost_with_the_worker_that_read_it_is_caught(lib, monkeypatch):
    _, res = run_one(lib["fieldops-crash-after-cancel-read"],
                     _install(monkeypatch, "ForgetsCancellation", ForgetsCancellation))
    assert res.verdict == "fail"
    assert "CANCEL-02" in {v.invariant for v in res.violations}

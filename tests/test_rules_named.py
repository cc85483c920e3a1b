"""The rule the chapter names, not only a rule that happens to notice:

* a completion callback that names no key, followed by a CONFIRMED with no other evidence, is the
  callback advancing state (LATE-01), on top of the exactly-once claim it also is (KNOW-02);
* a resend to a service that keeps no idempotency keys, whose only reads since the ambiguity could
  not prove absence yet (before the late-delivery bound), is blind (RETRY-01, an automatic failure):
  "Without that support, a negative read may be only temporarily negative".

Each is shown on the simulator's gallery adapter that makes the mistake, and the reference (the
careful design) still passes the same scenario."""
from __future__ import annotations

import pytest

from crashlab.run.conformance import run_one
from crashlab.scenario import library

REFERENCE = "crashlab.reference_impl:ReferenceAdapter"
APPLIES_CALLBACK = "crashlab.gallery.knowledge:LateCallbackApplied"
EARLY_NEGATIVE = "crashlab.gallery.knowledge:EventualNegativeAsAbsence"


@pytest.fixture(scope="module")
def lib():
    return {sc.id: sc for sc in library()}


def _found(lib, scenario, adapter):
    _, res = run_one(lib[scenario], adapter)
    return res, {v.invariant: v for v in res.violations}


@pytest.mark.parametrize("scenario", ["matrix-late-callback", "matrix-duplicate-callback"])
def test_a_keyless_callback_taken_as_confirmation_is_late01_and_still_an_exactly_once_claim(lib, scenario):
    res, found = _found(lib, scenario, APPLIES_CALLBACK)
    assert "LATE-01" in found, res.violations
    late = found["LATE-01"]
    assert "naming no key" in late.message and "advanced state" in late.message, late.message
    assert late.auto_fail is None                     # LATE-01 itself is no automatic failure ...
    assert found["KNOW-02"].auto_fail == "exactly-once claim"    # ... the claim with no evidence still is


@pytest.mark.parametrize("scenario", ["matrix-late-callback", "matrix-duplicate-callback", "t7-late-callback"])
def test_the_reference_reconciling_after_a_callback_is_not_late01(lib, scenario):
    res, found = _found(lib, scenario, REFERENCE)
    assert res.verdict == "pass" and "LATE-01" not in found, res.violations


def test_a_resend_on_a_temporarily_negative_read_to_a_keyless_service_is_a_blind_retry(lib):
    res, found = _found(lib, "matrix-late-arrival-search-only", EARLY_NEGATIVE)
    retry = found.get("RETRY-01")
    assert retry is not None, res.violations
    assert retry.auto_fail == "blind ambiguous retry"
    assert "keeps no idempotency keys" in retry.message and "too early" in retry.message, retry.message
    assert "REC-01" in found                          # the read still cannot prove absence: REC-01 stays


@pytest.mark.parametrize("scenario", ["matrix-eventual-consistency-lag", "matrix-lag-beyond-delivery-bound"])
def test_where_the_key_collapses_a_late_arrival_an_early_read_stays_a_reconciliation_failure(lib, scenario):
    res, found = _found(lib, scenario, EARLY_NEGATIVE)
    assert "REC-01" in found and "RETRY-01" not in found, res.violations


def test_the_reference_waiting_for_the_bound_on_a_keyless_service_passes(lib):
    res, found = _found(lib, "matrix-late-arrival-search-only", REFERENCE)
    assert res.verdict == "pass" and not found, res.violations

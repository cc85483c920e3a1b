"""The chapter's three scoring rules (AR-08 "Assess the eight traces"), each with an adapter
that breaks it and one that does not."""
from __future__ import annotations

import pytest

import support
from crashlab.checks.rubric import CAPS, score
from crashlab.checks.invariants import BY_ID
from crashlab.checks.rules import KEY_WITHOUT_INTENT, TWO_LIVE_WORKERS
from crashlab.run.conformance import check_run, run_one
from crashlab.world.ports import PortError
from crashlab.vocab.results import ScenarioResult, Violation
from crashlab.scenario import library
from support import INTENT, checkpoint, entry, run, scenario


# --------------------------------------------------------------------------- 1. blind retry
class Resender:
    """Sends once and dies (the scenario crashes it after the send); its replacement resends
    with no read at all: with ``KEY2`` / ``INTENT2``, the same or another key and intent."""

    KEY2 = "k-1"
    INTENT2 = dict(INTENT)

    async def run(self, p):
        info = await p.run.info()
        second = not info["worker"].endswith("/w1")
        try:
            lease = await p.lease.acquire(2_000)
        except PortError:
            await p.clock.sleep(3_000, "wait for the lease")
            lease = await p.lease.acquire(2_000)
        loaded = await p.checkpoints.load()
        await p.checkpoints.write(checkpoint(info, lease, loaded["version"] + 1), loaded["version"],
                                  lease["epoch"])
        key, intent = (self.KEY2, dict(self.INTENT2)) if second else ("k-1", dict(INTENT))
        e = {**entry(info["run_id"], lease["epoch"], "PROPOSED", key), "intent": intent}
        if not (second and key == "k-1"):
            await p.ledger.append(e)
        await p.ledger.append({**e, "knowledge": "SENT_UNKNOWN"})
        await p.service("reservation").call("reserve", key=key, intent=intent, retry_owner="caller")
        await p.run.finish("FAILED_EFFECT_UNKNOWN", next_owner="operator")


def _resend(monkeypatch, profile=None, key="k-1", intent=None):
    monkeypatch.setattr(Resender, "KEY2", key)
    monkeypatch.setattr(Resender, "INTENT2", intent or dict(INTENT))
    support.Resender = Resender
    sc = scenario(services={"reservation": profile or {}},
                  crashes=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "after"}])
    verdict = check_run(run(sc, "support:Resender"))
    blind = [v for v in verdict.violations if v.invariant == "RETRY-01"]
    assert blind, "the replacement's resend with no read is a blind retry"
    return blind[0]


def test_a_same_key_resend_to_a_deduplicating_service_costs_c3_not_the_score(monkeypatch):
    v = _resend(monkeypatch)
    assert v.auto_fail is None and "cannot duplicate" in v.message
    card = score([ScenarioResult(id="s", title="s", verdict="fail", dispositions={}, violations=(v,),
                                       exercised=tuple(BY_ID))],
                 adapter="x:Y", seed=None)
    assert card.auto_fail == () and card.total == 19 and card.lost[0].point.startswith("C3")


@pytest.mark.parametrize("profile, key, intent, why", [
    ({"idempotency": "none", "lookup": "none"}, "k-1", None, "declares no idempotency"),
    ({"retention": "1s"}, "k-1", None, "key retention lapsed"),
    ({}, "k-2", None, "a different key"),
    ({}, "k-1", {**INTENT, "quantity": 2}, "a changed intent"),
])
def test_a_resend_that_could_duplicate_stays_an_automatic_failure(monkeypatch, profile, key, intent, why):
    v = _resend(monkeypatch, profile, key, intent)
    assert v.auto_fail == "blind ambiguous retry" and why in v.message


def _scenarios(*ids):
    return [s for s in library() if s.id in ids]


def test_blind_retry_gallery_adapter_is_automatic_failure_only_where_the_service_could_duplicate():
    dedup, none = _scenarios("matrix-ambiguous-effect", "matrix-weak-service")
    kept = run_one(dedup, "crashlab.gallery.retries:BlindRetry")[1]
    failed = run_one(none, "crashlab.gallery.retries:BlindRetry")[1]
    assert {v.auto_fail for v in kept.violations if v.invariant == "RETRY-01"} == {None}
    assert "blind ambiguous retry" in {v.auto_fail for v in failed.violations if v.invariant == "RETRY-01"}


# --------------------------------------------------------------------------- 2. two live workers
def _card(adapter, *ids):
    return score([run_one(s, adapter)[1] for s in _scenarios(*ids)], adapter=adapter, seed=None)


def _kept_but_one(card, category):
    """The category's points, less the one lost, less those its one scenario did not exercise (never kept)."""
    from crashlab.checks.rubric import RUBRIC

    points = [p.id for p in RUBRIC if p.category == category]
    lost = {lp.point.split()[0] for lp in card.lost} & set(points)
    assert len(lost) == 1
    return len(points) - 1 - len(set(card.not_exercised) & set(points))


def test_two_live_recovery_workers_zero_the_ownership_category():
    card = _card("crashlab.gallery.ownership:UnfencedZombie", "matrix-stale-checkpoint")
    assert card.categories["ownership"]["score"] == 0
    assert [c["rule"] for c in card.extra["caps"]] == [TWO_LIVE_WORKERS]
    assert card.extra["caps"][0]["scenarios"] == ["matrix-stale-checkpoint"]


def test_an_ownership_loss_without_a_second_live_worker_costs_only_its_point():
    card = _card("crashlab.gallery.retries:UnboundedThrottleRetry", "matrix-throttling-deadline")
    assert card.categories["ownership"]["score"] == _kept_but_one(card, "ownership") and card.extra["caps"] == []


# --------------------------------------------------------------------------- 3. keys without intent
def test_a_key_without_defined_intent_earns_at_most_one_effect_correctness_point():
    card = _card("crashlab.gallery.identity:TenantlessKey", "matrix-cross-tenant-key-collision")
    assert card.categories["effect_correctness"]["score"] == 1
    assert [c["rule"] for c in card.extra["caps"]] == [KEY_WITHOUT_INTENT]


def test_an_effect_loss_with_a_defined_key_costs_only_its_point():
    card = _card("crashlab.gallery.knowledge:EventualNegativeAsAbsence", "matrix-eventual-consistency-lag")
    assert card.categories["effect_correctness"]["score"] == _kept_but_one(card, "effect_correctness")
    assert card.extra["caps"] == []


# --------------------------------------------------------------------------- the caps themselves
def test_each_cap_bounds_only_its_category_and_quotes_the_chapter():
    cats = {}
    for cap in CAPS:
        inv = "OWN-01" if cap.category == "ownership" else "KEY-01"
        v = Violation(invariant=inv, message="m", cap=cap.rule)
        card = score([ScenarioResult(id="s", title="s", verdict="fail", dispositions={}, violations=(v,),
                                       exercised=tuple(BY_ID))],
                     adapter="x:Y", seed=None)
        cats[cap.category] = card.categories[cap.category]["score"]
        assert card.total == 20 - (card.categories[cap.category]["max"] - cap.limit)
        assert "Assess the eight traces" in cap.source and cap.quote
    assert cats == {"ownership": 0, "effect_correctness": 1}

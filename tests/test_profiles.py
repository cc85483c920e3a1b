"""Every service profile either behaves as its describe() says or is refused at load with
a clear error; duplicated events keep their producer; the scenario vocabulary names every
event kind a trace holds."""
from __future__ import annotations

import itertools

import pytest

from crashlab.vocab.errors import InvalidScenario
from crashlab.world.ports import PortError
from crashlab.run.runner import run_scenario
from crashlab.scenario import PROFILE_CHOICES, from_dict
from crashlab.world.services import PROFILE_DEFAULTS, Reservation, profile_conflicts

INTENT = {"tenant": "T-1", "incident": "I-82", "part": "P-204", "slot": "S-19", "technician": "TECH-4",
          "quantity": 1, "principal": "U-7"}
BASE = {"id": "profiles", "title": "profiles", "clock": {"origin": "10:00", "horizon": "10:05"},
        "runs": [{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"}}]}
COMBINATIONS = [dict(zip(("idempotency", "lookup", "consistency"), c)) for c in itertools.product(
    *(PROFILE_CHOICES["reservation"][k] for k in ("idempotency", "lookup", "consistency")))]


class _Clock:
    def __init__(self):
        self.t = 0

    def __call__(self):
        return self.t


def _service(knobs: dict) -> tuple[Reservation, _Clock]:
    clock = _Clock()
    profile = {**PROFILE_DEFAULTS["reservation"], **knobs}
    if profile["consistency"] == "eventual":
        profile["lag_ms"] = 1000
    return Reservation("reservation", profile, lambda *a, **k: None, clock), clock


@pytest.mark.parametrize("knobs", COMBINATIONS, ids=lambda k: "-".join(k.values()))
def test_each_profile_behaves_as_described_or_is_refused(knobs):
    doc = {**BASE, "services": {"reservation": dict(knobs, **({"lag": "1s"} if knobs["consistency"] == "eventual"
                                                               else {}))}}
    if profile_conflicts("reservation", {**PROFILE_DEFAULTS["reservation"], **knobs}):
        with pytest.raises(InvalidScenario) as err:
            from_dict(doc, file="profiles.yaml")
        text = str(err.value)
        assert "profiles.yaml" in text and "services.reservation.lookup" in text and "idempotency" in text
        return
    from_dict(doc, file="profiles.yaml")               # accepted at load
    svc, clock = _service(knobs)
    described = svc.describe()
    first = svc.execute("reserve", {"key": "k-1", "intent": INTENT}, cause="adapter", run="run-82", call=1)
    clock.t = 5000                                     # past any lag
    # idempotency as described
    again = svc.execute("reserve", {"key": "k-1", "intent": INTENT}, cause="adapter", run="run-82", call=2)
    if described["idempotency"] == "none":
        assert again["ref"] != first["ref"] and not again["replayed"]
    else:
        assert again["ref"] == first["ref"] and again["replayed"]
    if described["idempotency"] == "semantic":
        with pytest.raises(PortError) as err:
            svc.execute("reserve", {"key": "k-1", "intent": {**INTENT, "quantity": 2}}, cause="adapter",
                        run="run-82", call=3)
        assert err.value.code == "intent_mismatch"
    # lookup as described: by key finds the committed hold; search finds it by incident and slot
    if described["lookup"] == "by_key":
        found = svc.execute("lookup", {"key": "k-1"}, cause="adapter", run="run-82", call=4)
        assert found["found"] and found["record"]["ref"] == first["ref"]
    else:
        with pytest.raises(PortError):
            svc.execute("lookup", {"key": "k-1"}, cause="adapter", run="run-82", call=4)
    if described["lookup"] == "none":
        with pytest.raises(PortError):
            svc.execute("search", {"incident": "I-82", "slot": "S-19"}, cause="adapter", run="run-82", call=5)
    else:
        hits = svc.execute("search", {"incident": "I-82", "slot": "S-19"}, cause="adapter", run="run-82", call=5)
        assert first["ref"] in [r["ref"] for r in hits["records"]]
    # consistency as described: an eventual read lags, a strong one does not
    clock.t = 5000
    fresh = svc.execute("reserve", {"key": "k-2", "intent": {**INTENT, "slot": "S-20"}}, cause="adapter",
                        run="run-82", call=6)
    if described["lookup"] != "none":
        hits = svc.execute("search", {"incident": "I-82", "slot": "S-20"}, cause="adapter", run="run-82", call=7)
        seen = fresh["ref"] in [r["ref"] for r in hits["records"]]
        assert seen == (described["consistency"] == "strong")


def test_a_fencing_profile_refuses_an_older_fence():
    svc, _ = _service({"fencing": True})
    svc.execute("reserve", {"key": "k-1", "intent": INTENT, "fence": 2}, cause="adapter", run="run-82", call=1)
    with pytest.raises(PortError) as err:
        svc.execute("reserve", {"key": "k-2", "intent": INTENT, "fence": 1}, cause="adapter", run="run-82", call=2)
    assert err.value.code == "fenced"


def test_duplicated_events_keep_their_declared_producer():
    doc = {**BASE, "events": [{"at": "10:00:01", "type": "event", "kind": "note", "producer": "queue",
                               "producer_seq": 4, "duplicates": 2, "duplicate_after": "1s"}]}
    events = run_scenario(from_dict(doc, file="dup.yaml"), "crashlab.reference_impl:ReferenceAdapter").events
    notes = [e["event"] for e in events if e["kind"] == "deliver" and e["event"]["type"] == "note"]
    assert len(notes) == 3
    assert {(n["producer"], n["producer_seq"], n["event_id"]) for n in notes} == {("queue", 4, notes[0]["event_id"])}


def test_ledger_rejected_is_evidence_a_scenario_may_require():
    sc = from_dict({**BASE, "expect": {"evidence": ["ledger_rejected"]}}, file="x.yaml")
    assert sc.expect["evidence"] == ["ledger_rejected"] or "ledger_rejected" in str(sc.expect)

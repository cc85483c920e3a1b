"""The world: transport faults with their send boundaries, service capability knobs,
platform primitives. Each test reads the ground truth from the trace's remote lane."""
import pytest

from crashlab.vocab.model import PLATFORM_PORTS
from crashlab.world.platform import Primitive
from crashlab.world.ports import PortError
from crashlab.scenario import from_dict
from crashlab.world.services import Reservation, Registry, PROFILE_DEFAULTS
from crashlab.world.world import Streams, World
from support import INTENT, Script, effects, kinds, run, scenario


def reserve_fault(fault, **extra):
    return scenario(faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                             "fault": fault, **extra}])


@pytest.mark.parametrize("fault,code,definite,landed", [
    ("refused", "refused", True, 0),
    ("timeout_before_send", "timeout_before_send", True, 0),
    ("drop_request", "timeout", False, 0),
    ("lost_response", "timeout", False, 1),
    ("throttled", "throttled", True, 0),
    ("server_error_before", "server_error", False, 0),
    ("server_error_after", "server_error", False, 1),
])
def test_transport_fault_send_boundaries(fault, code, definite, landed):
    Script.SEEN.clear()
    result = run(reserve_fault(fault))
    assert Script.SEEN[-1] == ("error", code, definite)
    assert len(effects(result)) == landed
    assert kinds(result, "fault", lane="fault")[0]["fault"] == fault


def test_late_arrival_lands_after_the_timeout():
    Script.SEEN.clear()
    result = run(reserve_fault("late_arrival", delay="20s"))
    assert Script.SEEN[-1] == ("error", "timeout", False)
    [effect] = effects(result)
    timeout = next(e for e in result.events if e["kind"] == "result" and e.get("error"))
    assert effect["t"] > timeout["t"], "the effect must land after the caller gave up"
    late = kinds(result, "late_arrival")[0]
    assert late["delay_ms"] == 20_000


def test_duplicate_delivery_runs_twice_without_idempotency():
    sc = scenario(services={"reservation": {"idempotency": "none", "lookup": "none"}},
                  faults=[{"match": {"port": "reservation", "op": "reserve"}, "fault": "duplicate_delivery"}])
    result = run(sc)
    assert [e["cause"] for e in effects(result)] == ["adapter", "duplicate_delivery"]


def test_duplicate_delivery_collapses_under_semantic_idempotency():
    sc = scenario(faults=[{"match": {"port": "reservation", "op": "reserve"}, "fault": "duplicate_delivery"}])
    result = run(sc)
    assert len(effects(result)) == 1
    assert kinds(result, "replayed")


def test_proxy_retries_amplify_a_5xx_unless_the_caller_owns_retries():
    sc = scenario(services={"reservation": {"idempotency": "none", "lookup": "none", "proxy_retries": 2}},
                  faults=[{"match": {"port": "reservation", "op": "reserve"}, "fault": "server_error_after"}])
    result = run(sc)
    assert [e["cause"] for e in effects(result)] == ["adapter", "proxy_retry", "proxy_retry"]


class _Svc:
    def __init__(self, kind=Reservation, **profile):
        self.t = 0
        self.events = []
        prof = {**PROFILE_DEFAULTS[kind.kind], **profile}
        self.svc = kind(kind.kind, prof, lambda event, **d: self.events.append((event.kind, d)), lambda: self.t)

    def __call__(self, op, **args):
        return self.svc.execute(op, args, cause="adapter", run="r", call=1)


def test_semantic_idempotency_replays_and_refuses_changed_intent():
    s = _Svc()
    first = s("reserve", key="k", intent=INTENT)
    again = s("reserve", key="k", intent=INTENT)
    assert again["ref"] == first["ref"] and again["replayed"]
    with pytest.raises(PortError) as err:
        s("reserve", key="k", intent={**INTENT, "quantity": 2})
    assert err.value.code == "intent_mismatch" and err.value.definite


def test_key_only_idempotency_silently_returns_the_first_intent():
    s = _Svc(idempotency="key_only")
    first = s("reserve", key="k", intent=INTENT)
    other = s("reserve", key="k", intent={**INTENT, "tenant": "T-2"})
    assert other["ref"] == first["ref"] and other["intent"]["tenant"] == "T-1"


def test_key_retention_expiry_runs_the_effect_again_and_forgets_the_key():
    s = _Svc(retention_ms=1000)
    first = s("reserve", key="k", intent=INTENT)
    s.t = 1000
    assert s("lookup", key="k")["found"] is False
    second = s("reserve", key="k", intent=INTENT)
    assert second["ref"] != first["ref"]
    # the business record is still there for a search by incident and slot
    assert len(s("search", incident="I-82", slot="S-19")["records"]) == 2


def test_eventual_consistency_hides_recent_commits():
    s = _Svc(consistency="eventual", lag_ms=5000)
    s("reserve", key="k", intent=INTENT)
    s.t = 4999
    assert s("lookup", key="k")["found"] is False
    assert s("lookup", key="k")["as_of"] == -1
    s.t = 5000
    assert s("lookup", key="k")["found"] is True


def test_lookup_modes_and_aggregate_ambiguity():
    s = _Svc(lookup="by_incident_slot")
    with pytest.raises(PortError) as err:
        s("lookup", key="k")
    assert err.value.code == "bad_request"
    s.svc.execute("reserve", {"key": "o", "intent": {**INTENT, "incident": "I-99"}}, cause="other_actor",
                  run=None, call=None)
    s("reserve", key="k", intent=INTENT)
    assert s("aggregate", part="P-204")["available"] == PROFILE_DEFAULTS["reservation"]["stock"] - 2
    assert [r["intent"]["incident"] for r in s("search", incident="I-82", slot="S-19")["records"]] == ["I-82"]


def test_fencing_rejects_an_older_token():
    s = _Svc(fencing=True)
    s("reserve", key="a", intent=INTENT, fence=2)
    with pytest.raises(PortError) as err:
        s("reserve", key="b", intent=INTENT, fence=1)
    assert err.value.code == "fenced"


def test_release_is_a_second_effect_and_keeps_the_original():
    s = _Svc()
    held = s("reserve", key="k", intent=INTENT)
    rel = s("release", key="c", ref=held["ref"])
    assert rel["status"] == "released" and rel["release_ref"] != held["ref"]
    assert [r.ref for r in s.svc.records] == [held["ref"], rel["release_ref"]]


def test_registry_already_exists_hides_the_first_success_and_jobs_can_be_waited():
    s = _Svc(kind=Registry)
    job = s("publish", key="p", intent={"package": "pkg", "version": "1.0"})
    with pytest.raises(PortError) as err:
        s("publish", key="p2", intent={"package": "pkg", "version": "1.0"})
    assert err.value.code == "already_exists"
    assert s("wait_job", job_id=job["job_id"])["status"] == "running"
    assert s("get_version", package="pkg", version="1.0")["in_flight"] is True
    s.t = PROFILE_DEFAULTS["registry"]["job_ms"]
    assert s("get_version", package="pkg", version="1.0")["found"] is True


def test_streams_are_independent_of_each_other():
    a, b = Streams(7), Streams(7)
    b.get("something-new").random()  # a new component draws first
    assert [a.get("transport").random() for _ in range(5)] == [b.get("transport").random() for _ in range(5)]
    assert Streams(8).get("transport").random() != Streams(7).get("transport").random()


def test_every_platform_operation_but_the_clock_has_exactly_one_primitive():
    world = World(scenario())
    declared = [key for cls in Primitive.__subclasses__() for key in cls.PORTS]
    assert len(declared) == len(set(declared)), "two primitives claim one (port, op)"
    wanted = {(port, op) for port, ops in PLATFORM_PORTS.items() if port != "clock" for op in ops}
    assert set(declared) == wanted == set(world._handlers)


def test_lease_epochs_are_monotonic_and_held_until_expiry_after_a_crash():
    Script.SEEN.clear()
    sc = scenario(crashes=[{"match": {"port": "checkpoints", "op": "write", "nth": 1}, "boundary": "after",
                            "restart_after": "1s"}])
    result = run(sc)
    leases = [e for e in kinds(result, "lease") if e["op"] != "release"]   # the finished worker's release
    assert [e["epoch"] for e in leases] == [1, 2]
    assert leases[1]["t"] >= leases[0]["expires_at"], "the crashed worker's lease stays held until it expires"
    assert ("lease", "lease_held") in Script.SEEN
    # the crashed worker's checkpoint write took effect: the new worker's CAS expects version 1
    cps = kinds(result, "checkpoint")
    assert [c["version"] for c in cps] == [1, 2]


def test_checkpoint_cas_refuses_a_stale_expected_version():
    class Stale:
        async def run(self, p):
            info = await p.run.info()
            lease = await p.lease.acquire(30_000)
            from support import checkpoint
            await p.checkpoints.write(checkpoint(info, lease, 1), 0, lease["epoch"])
            try:
                await p.checkpoints.write(checkpoint(info, lease, 2), 0, lease["epoch"])
            except PortError as exc:
                await p.run.finish("FAILED_NO_EFFECT", reason=exc.code)

    import support
    support.Stale = Stale
    result = run(scenario(), "support:Stale")
    assert kinds(result, "checkpoint_rejected")[0]["reason"] == "version_conflict"
    assert kinds(result, "finish")[0]["reason"] == "version_conflict"


def test_time_window_and_knowledge_rule_matching():
    sc = scenario(faults=[{"match": {"port": "reservation", "from": "10:05"}, "fault": "refused"}])
    assert not kinds(run(sc), "fault", lane="fault")
    sc = scenario(faults=[{"match": {"port": "reservation", "until": "10:05"}, "fault": "refused"}])
    assert kinds(run(sc), "fault", lane="fault")


def test_rules_match_on_what_the_call_writes():
    from support import checkpoint

    class Writes:
        async def run(self, p):
            info = await p.run.info()
            lease = await p.lease.acquire(500)  # expires before the 1 s restart delay
            loaded = await p.checkpoints.load()
            version = loaded["version"]
            for state in ("VALIDATED", "PROPOSED"):
                if version and state == "VALIDATED":
                    continue
                await p.checkpoints.write(checkpoint(info, lease, version + 1, state), version, lease["epoch"])
                version += 1
            await p.run.finish("FAILED_NO_EFFECT")

    import support
    support.Writes = Writes
    sc = scenario(crashes=[{"match": {"port": "checkpoints", "op": "write", "state": "PROPOSED"},
                            "boundary": "before"}])
    result = run(sc, "support:Writes")
    crash = kinds(result, "crash")[0]
    written = [c["state"] for c in kinds(result, "checkpoint")]
    assert written == ["VALIDATED", "PROPOSED"]
    assert crash["t"] < kinds(result, "checkpoint")[1]["t"]
    assert [f["disposition"] for f in kinds(result, "finish")] == ["FAILED_NO_EFFECT"]


def test_background_traffic_from_other_actors_is_seeded():
    sc = scenario(services={"reservation": {"background": "2m"}})
    first, again = run(sc, seed=3), run(sc, seed=3)
    others = [e for e in effects(first) if e["cause"] == "other_actor"]
    assert len(others) >= 5 and all(e["intent"]["part"] == "P-204" for e in others)
    assert [e["intent"] for e in effects(again)] == [e["intent"] for e in effects(first)]
    assert [e["t"] for e in effects(run(sc, seed=4))] != [e["t"] for e in effects(first)]


# --------------------------------------------------------------------------- a run with earlier history
def test_a_run_with_history_continues_its_checkpoint_versions_and_lease_epochs():
    from crashlab.scenario import library
    from crashlab.run.runner import run_scenario

    sc = next(s for s in library() if s.id == "handoff-1-sent-unknown-cancelled")
    events = run_scenario(sc).events
    first_load = next(e for e in events if e["kind"] == "result" and isinstance(e.get("value"), dict)
                      and "checkpoint" in e["value"])
    assert first_load["value"] == {"version": 12, "checkpoint": None}
    cps = [(e["version"], e["state"], e["epoch"]) for e in events if e["kind"] == "checkpoint"]
    assert cps[0][0] == 13 and (17, "EFFECT_IN_FLIGHT", 6) in cps      # AR-08: "version 17 under lease L-6"
    assert [e["epoch"] for e in events if e["kind"] == "lease" and e.get("op") == "acquire"] == [6, 7]


@pytest.mark.parametrize("adapter", ["crashlab.reference_impl:ReferenceAdapter", "crashlab.gallery.independent:Patient",
                                     "crashlab.gallery.ownership:UnfencedZombie"])
def test_earlier_history_moves_no_verdict(adapter):
    import dataclasses

    from crashlab.checks import check_trace
    from crashlab.run.runner import run_scenario
    from crashlab.scenario import library

    for sc in library():
        if not sc.id.startswith(("t1-", "t2-", "t3-", "t4-", "t5-", "t6-", "t7-", "t8-", "handoff", "combined-stale")):
            continue
        moved = dataclasses.replace(sc, runs=tuple(dataclasses.replace(
            r, history={"checkpoint_version": 16, "lease_epoch": 6}) for r in sc.runs))
        before, after = check_trace(run_scenario(sc, adapter).events), check_trace(run_scenario(moved, adapter).events)
        assert (after.verdict, {v.invariant for v in after.violations}) == \
            (before.verdict, {v.invariant for v in before.violations}), sc.id


def test_history_fields_are_checked():
    doc = {"id": "x", "title": "x", "runs": [{"id": "run-82", "intent": {"part": "P-1"},
                                               "history": {"checkpoint_version": 3, "epochs": 2}}]}
    with pytest.raises(Exception, match=r"runs\[0\]\.history.*epochs"):
        from_dict(doc)
    doc["runs"][0]["history"] = {"checkpoint_version": -1}
    with pytest.raises(Exception, match="checkpoint_version"):
        from_dict(doc)


def _callbacks(result):
    return [e for e in result.events if e["kind"] == "deliver" and e["event"]["type"] == "callback"]


@pytest.mark.parametrize("fault,extra,commits", [
    (None, {}, 1),
    ("lost_response", {}, 1),
    ("server_error_after", {}, 1),
    ("late_arrival", {"delay": "20s"}, 1),
    ("server_error_before", {}, 0),
    ("drop_request", {}, 0),
])
def test_a_completion_callback_follows_every_commit_whatever_became_of_the_response(fault, extra, commits):
    rule = {"match": {"port": "reservation", "op": "reserve", "nth": 1}, "fault": fault, **extra}
    sc = scenario(services={"reservation": {"callback_delay": "2s"}}, faults=[rule] if fault else [])
    result = run(sc)
    calls = _callbacks(result)
    assert len(calls) == commits == len(effects(result))
    for cb, effect in zip(calls, effects(result)):
        assert cb["t"] == effect["t"] + 2_000, "the callback leaves callback_delay after the commit"


def test_a_duplicate_delivery_that_commits_again_sends_its_own_callback_and_a_replay_none():
    dup = {"match": {"port": "reservation", "op": "reserve", "nth": 1}, "fault": "duplicate_delivery"}
    twice = run(scenario(services={"reservation": {"callback_delay": "2s", "idempotency": "none",
                                                   "lookup": "none"}}, faults=[dup]))
    first = [e["ref"] for e in effects(twice)][:2]
    assert [e["cause"] for e in effects(twice)][:2] == ["adapter", "duplicate_delivery"]
    refs = [cb["event"]["payload"]["result"]["ref"] for cb in _callbacks(twice)]
    assert all(refs.count(ref) == 1 for ref in first)
    collapsed = run(scenario(services={"reservation": {"callback_delay": "2s"}}, faults=[dup]))
    assert kinds(collapsed, "replayed")
    assert [cb["event"]["payload"]["result"]["ref"] for cb in _callbacks(collapsed)] == ["R-1"]

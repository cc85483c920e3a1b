"""The reference adapter's parts: canonicalization, the recovery matrix, the checkpoint
layouts and their migration, the inbox, and the decision table's coverage."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from crashlab.vocab.model import ERROR_CODES, Knowledge, RunState, validate_checkpoint
from crashlab.run.runner import run_scenario
from crashlab.scenario import load_file

from crashlab.reference_impl import adapter as adapter_module, canonical, matrix, migrations, transitions
from crashlab.reference_impl.inbox import absorb, ordered
from crashlab.reference_impl.record import RunRecord, decode, encode, events_from_v1, events_to_v1

from test_reference import ADAPTER, DATA, INTENT, SCENARIOS, _collision, checkpoints, run

# --------------------------------------------------------------------------- canonical


def _key(intent, version=1, operation="reserve"):
    full = {**intent, "proposal_hash": canonical.proposal_hash(operation, intent, version)}
    return canonical.semantic_key(operation, full, version)


def test_the_key_depends_on_meaning_only():
    reordered = dict(reversed(list(INTENT.items())))
    padded = {**INTENT, "part": " P-204 "}
    assert _key(INTENT) == _key(reordered) == _key(padded)
    for field, value in [("quantity", 2), ("slot", "S-20"), ("tenant", "T-2"), ("principal", "U-8"),
                         ("incident", "I-83"), ("technician", "TECH-5"), ("part", "P-205")]:
        assert _key({**INTENT, field: value}) != _key(INTENT), f"{field} is meaning-bearing"


def test_the_two_canonicalization_versions_disagree_on_bytes_but_not_on_validity():
    lower = {**INTENT, "part": "p-204"}
    assert _key(INTENT, 1) != _key(INTENT, 2)
    assert _key(lower, 2) == _key(INTENT, 2), "version 2 folds case"
    assert _key(lower, 1) != _key(INTENT, 1), "version 1 does not"
    assert canonical.proposal_hash("reserve", INTENT, 1).startswith("ph1-")
    assert canonical.proposal_hash("reserve", INTENT, 2).startswith("ph2-")


@pytest.mark.parametrize("change,problem", [
    ({"quantity": 0}, "quantity"), ({"quantity": True}, "quantity"), ({"quantity": "1"}, "quantity"),
    ({"slot": ""}, "slot"), ({"colour": "red"}, "colour"),
])
def test_validation_names_the_bad_field(change, problem):
    problems = canonical.validate("reserve", {**INTENT, **change})
    assert problems and problem in problems[0]
    assert canonical.validate("reserve", INTENT) == ()


def test_validation_requires_every_field():
    intent = {k: v for k, v in INTENT.items() if k != "technician"}
    assert canonical.validate("reserve", intent) == ("technician: expected a non-empty string, got None",)


# --------------------------------------------------------------------------- matrix
REQUIRED_ROWS = {"validation_failure", "transient_read", "throttling", "timeout_before_send",
                 "ambiguous_effect", "known_completion", "non_compensatable_effect", "lease_loss",
                 "stale_checkpoint", "incompatible_version", "cancellation", "duplicate_event",
                 "late_callback", "contradictory_evidence", "permission_denied", "key_collision",
                 "key_retention_expired", "eventual_consistency_lag", "reconciliation_service_down",
                 "retry_amplification", "weak_service"}


def test_the_matrix_has_every_required_row_with_every_column():
    assert REQUIRED_ROWS <= set(matrix.ROW)
    for row in matrix.ROWS:
        for column in ("trigger", "evidence", "retry_owner", "deadline", "reconciliation_read", "terminal"):
            assert getattr(row, column), f"{row.name}.{column}"


@pytest.mark.parametrize("phase", ["dispatch", "read", "platform", "checkpoint", "lease"])
def test_every_port_error_is_classified_in_every_phase(phase):
    for code in ERROR_CODES:
        assert matrix.classify(phase, code) in matrix.ROWS


def test_only_definite_errors_allow_a_same_key_retry_and_only_indefinite_ones_are_ambiguous():
    for row in matrix.ROWS:
        codes = [c for p, c in row.matches if p == "dispatch" and c in ERROR_CODES]
        if row.action is matrix.Action.RETRY_SAME_KEY or row.knowledge in (Knowledge.PROPOSED,
                                                                            Knowledge.REJECTED):
            assert all(ERROR_CODES[c].definite for c in codes), row.name
        if row.name == "ambiguous_effect":
            assert codes and not any(ERROR_CODES[c].definite for c in codes)


def test_every_row_names_its_evidence_in_some_reference_trace():
    text = "\n".join([run(name).to_jsonl() for name in SCENARIOS]
                     + [_collision(mode, quantity=3).to_jsonl() for mode in ("semantic", "key_only")])
    policy_rows = {r.name for r in matrix.ROWS if r.action is matrix.Action.DECLARE_RETRY_OWNER}
    missing = [r.name for r in matrix.ROWS if r.name not in policy_rows and r.name not in text]
    assert missing == []


# --------------------------------------------------------------------------- checkpoint layouts and migrations
def _frozen_checkpoints() -> dict[str, dict]:
    """One frozen schema-1 checkpoint per state reached by the reference scenarios."""
    frozen: dict[str, dict] = {}
    for name in SCENARIOS:
        for cp in checkpoints(run(name)):
            body = cp["checkpoint"]
            if body["contract"]["schema_version"] == 1 and body["contract"]["canonicalization_version"] == 1:
                frozen.setdefault(cp["state"], body)
    return frozen


FROZEN = _frozen_checkpoints()


def test_the_frozen_checkpoints_cover_the_difficult_states():
    assert {"WAITING_HUMAN", "EFFECT_PREPARED", "EFFECT_IN_FLIGHT", "RECONCILING", "COMPENSATING",
            "CANCELLED_EFFECT_REMAINS", "CANCELLED_EFFECT_UNKNOWN", "WAITING_RETRY"} <= FROZEN.keys()


@pytest.mark.parametrize("state", sorted(FROZEN))
def test_migration_of_every_frozen_state_keeps_its_meaning(state):
    old = FROZEN[state]
    compat = migrations.decide(old, {"schema_version": 2, "canonicalization_version": 2})
    assert compat.disposition == "migrate"
    new = migrations.migrate(old, previous_version=7, compat=compat, owner="w9", epoch=9)
    assert validate_checkpoint(new) == []
    assert new["control"]["state"] == "MIGRATING" and new["migration"]["previous_state"] == state
    assert new["migration"]["previous_version"] == 7 and new["migration"]["changes"]
    for group in ("identity",):
        assert new[group] == old[group]
    for field in ("cancellation", "deadline", "budgets", "event_sequence"):
        assert new["control"][field] == old["control"][field]
    assert new["effects"] == old["effects"], "unresolved effects and their keys are kept"
    for field in ("approval", "proposal", "proposal_hash", "intake", "outcome"):
        assert new["evidence"][field] == old["evidence"][field], "authority is never refreshed"
    assert old["control"]["state"] == state, "the old record is not modified"
    before, after = decode(old), decode(new)
    assert after.events == before.events and after.contract["schema_version"] == 2


@pytest.mark.parametrize("cp,env,disposition", [
    ({"schema_version": 1, "canonicalization_version": 1}, {"schema_version": 1, "canonicalization_version": 1}, "replay"),
    ({"schema_version": 1, "canonicalization_version": 1}, {"schema_version": 2, "canonicalization_version": 1}, "migrate"),
    ({"schema_version": 1, "canonicalization_version": 2}, {"schema_version": 2, "canonicalization_version": 2}, "migrate"),
    ({"schema_version": 2, "canonicalization_version": 1}, {"schema_version": 1, "canonicalization_version": 1}, "pin"),
    ({"schema_version": 1, "canonicalization_version": 2}, {"schema_version": 1, "canonicalization_version": 1}, "pin"),
    ({"schema_version": 1, "canonicalization_version": 1}, {"schema_version": 3, "canonicalization_version": 1}, "pin"),
    ({"schema_version": 3, "canonicalization_version": 1}, {"schema_version": 1, "canonicalization_version": 1}, "stop"),
])
def test_compatibility_has_four_dispositions_and_no_fifth(cp, env, disposition):
    assert migrations.decide({"contract": cp}, env).disposition == disposition


def test_a_fresh_worker_of_unimplemented_code_stops():
    assert migrations.decide(None, {"schema_version": 3, "canonicalization_version": 1}).disposition == "stop"
    assert migrations.decide(None, {"schema_version": 2, "canonicalization_version": 2}).disposition == "replay"


def test_both_layouts_round_trip_and_fold_duplicates():
    events = {"a": {"seq": 1, "type": "intake", "disposition": "accepted", "detail": {}, "duplicates": []},
              "b": {"seq": 2, "type": "cancel", "disposition": "accepted", "detail": {}, "duplicates": [4]}}
    log = events_to_v1(events)
    assert [i["seq"] for i in log] == [1, 2, 4] and log[2]["disposition"].startswith("duplicate_event: duplicate of seq 2")
    assert events_from_v1(log) == events
    record = RunRecord(run_id="r", task_id="r/reserve", tenant="T-1", principal="U-7",
                       state=RunState.VALIDATED, events=events, deadline=5,
                       contract={"schema_version": 1, "code_version": 1, "canonicalization_version": 1,
                                 "policy_version": 1, "capability_version": 1})
    for schema in (1, 2):
        rec = record.evolve(contract={**record.contract, "schema_version": schema})
        cp = encode(rec, state=RunState.VALIDATED, owner="w1", epoch=1, state_version=1)
        assert validate_checkpoint(cp) == [] and decode(cp) == rec


# --------------------------------------------------------------------------- inbox
def _event(seq, event_id, etype, producer="user", producer_seq=None, **payload):
    return {"seq": seq, "event_id": event_id, "type": etype, "producer": producer,
            "producer_seq": producer_seq, "payload": payload, "at": seq * 10}


def test_sequenced_events_of_one_producer_apply_in_producer_order():
    events = [_event(1, "i", "intake", "intake", 1), _event(2, "c2", "event", "p", 2),
              _event(3, "x", "cancel"), _event(4, "c1", "event", "p", 1)]
    assert [e["event_id"] for e in ordered(events)] == ["i", "c1", "x", "c2"]


def test_a_duplicate_delivery_is_recorded_and_causes_no_second_transition():
    record = RunRecord(run_id="r", task_id="r", tenant="", principal="", state=None, contract={})
    first = absorb(record, [_event(1, "c", "cancel"), _event(2, "c", "cancel")]).record
    assert first.cancellation["seq"] == 1
    assert first.events["c"]["duplicates"] == [2]
    again = absorb(first, [_event(3, "c", "cancel")]).record
    assert again.cancellation == first.cancellation and again.events["c"]["duplicates"] == [2, 3]


def test_a_callback_is_evidence_only():
    record = RunRecord(run_id="r", task_id="r", tenant="", principal="", state=None, contract={})
    after = absorb(record, [_event(1, "cb", "callback", "reservation", key="k", result={"ref": "R-1"})])
    assert after.record.evolve(events={}, event_sequence=0) == record
    assert after.record.events["cb"]["detail"] == {"service": None, "key": "k", "ref": "R-1"}


# --------------------------------------------------------------------------- the decision table
def test_every_declared_transition_is_taken_by_some_reference_scenario():
    taken: set[str] = set()
    real_choose = transitions.choose

    def choose(facts):
        transition = real_choose(facts)
        taken.add(transition.name)
        return transition

    with mock.patch.object(adapter_module, "choose", choose):
        for path in sorted(DATA.glob("*.yaml")):
            run_scenario(load_file(path), ADAPTER)
        _collision("semantic", quantity=3)
        # a crash between the terminal checkpoint and the finish: the next worker replays it
        import test_reference_crashes
        test_reference_crashes.crash_at("lost_response", "run", "finish", 1, "before")
    assert [t.name for t in transitions.TABLE if t.name not in taken] == []


def test_each_transition_names_its_chapter_section_and_an_action():
    for t in transitions.TABLE:
        assert t.section and t.action in adapter_module.ACTIONS, t.name
        assert (t.row is not None) == (t.action == "finish"), t.name


# --------------------------------------------------------------------------- determinism
def test_a_seed_reproduces_the_trace_byte_for_byte_in_another_process():
    path = DATA / "cancel_in_flight.yaml"
    code = ("import sys; from crashlab.scenario import load_file; from crashlab.run.runner import run_scenario; "
            f"sys.stdout.write(run_scenario(load_file({str(path)!r}), {ADAPTER!r}).to_jsonl())")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           cwd=Path(__file__).parent.parent, check=True).stdout
    assert other == run_scenario(load_file(path), ADAPTER).to_jsonl()
    assert json.loads(other.splitlines()[-1])["kind"] == "end"

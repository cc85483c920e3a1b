"""Port arguments are checked at the boundary against their documented shapes (crashlab.world.ports.ARGUMENTS),
in-process and over the wire alike: a wrong shape is a ``bad_request`` answer naming the port and the
field (arguments that are not an object at all: an adapter fault), never an internal error."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boundary_adapters import ANSWERS_VAR, CALLS_VAR
from crashlab.world.boundary import argument_problems, refuse_malformed
from crashlab.checks.index import RECORD_FAULTS
from crashlab.cli import main
from crashlab.run.conformance import check_run
from crashlab.vocab.model import PLATFORM_PORTS, SERVICE_OPS, PortCall
from crashlab.world.ports import ARGUMENTS, PortError
from crashlab.scenario.strategies import arguments, port_calls
from support import INTENT, checkpoint, kinds, run, scenario

HERE = Path(__file__).parent
ROOT = HERE.parent
PY = sys.executable
SERVICES = {"reservation": {}, "notification": {}, "registry": {}}


def over_the_wire(name: str) -> str:
    return f"exec:env PYTHONPATH={HERE}:{ROOT} {PY} -m crashlab.run.wire boundary_adapters:{name}"


BOTH = pytest.mark.parametrize("spec", [lambda n: f"boundary_adapters:{n}", over_the_wire],
                               ids=["in-process", "wire"])


def registry_scenario(**extra):
    return scenario(services={"registry": {"job": "90s"}},
                    runs=[{"id": "run-pub", "service": "registry", "approval": {"mode": "none"},
                           "intent": {"tenant": "T-1", "package": "adc-cli", "version": "1.4.1",
                                      "principal": "U-7"}}], **extra)


# --------------------------------------------------------------------------- the table
def test_the_table_names_every_operation_of_every_port():
    ops = {(p, o) for p, names in PLATFORM_PORTS.items() for o in names} \
        | {(s, o) for s, names in SERVICE_OPS.items() for o in names}
    assert set(ARGUMENTS) == ops


@pytest.mark.parametrize("port, op, args, field, words", [
    ("registry", "wait_job", {"job_id": "J-1", "wait_ms": "soon"}, "wait_ms", "expected integer or null, got string"),
    ("lease", "acquire", {}, "ttl_ms", "missing"),
    ("lease", "acquire", {"ttl_ms": 1000, "owner": "me"}, "owner", "not an argument"),
    ("lease", "acquire", {"ttl_ms": True}, "ttl_ms", "got boolean"),
    ("lease", "renew", {"epoch": 1.0, "ttl_ms": 1}, "epoch", "expected integer, got number"),
    ("authority", "request", {"proposal_hash": [1], "action": "reserve"}, "proposal_hash", "got array"),
    ("run", "finish", {"disposition": "PINNED", "packet": {"pinned_env": [1]}}, "packet.pinned_env",
     "expected object"),
    ("run", "finish", {"disposition": "SUCCEEDED", "packet": []}, "packet", "expected object or null"),
    ("reservation", "release", {"ref": "R-1", "intent": [1]}, "intent", "expected object"),
    ("reservation", "lookup", {"key": {"a": 1}}, "key", "expected string, got object"),
    ("operator", "escalate", {"packet": "help"}, "packet", "expected object"),
])
def test_a_wrong_shape_is_a_bad_request_naming_the_port_op_and_field(port, op, args, field, words):
    with pytest.raises(PortError) as err:
        refuse_malformed(PortCall(port=port, op=op, args=args))
    assert err.value.code == "bad_request" and err.value.definite
    assert err.value.message.startswith(f"{port}.{op}: {field}: ") and words in err.value.message
    assert err.value.details["field"] == field


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(port_calls())
def test_the_quick_check_of_a_shape_agrees_with_the_full_one(call):
    """The quick check that passes most calls never lets one through that the full check refuses,
    and what it refuses, the full check names."""
    from crashlab.world.boundary import _SHAPES, _problems

    port, op, args = call
    shape = _SHAPES.get((port, op))
    if shape is None or type(args) is not dict:
        return
    full = _problems(shape, args)
    if shape.fits(args):
        assert full == []
    assert argument_problems(port, op, args) == full


@pytest.mark.parametrize("port, op, args", [
    ("lease", "acquire", {"ttl_ms": True}), ("lease", "acquire", {}), ("lease", "acquire", {"ttl_ms": 1, "x": 1}),
    ("clock", "sleep", {"ms": 1.5, "reason": "r"}), ("checkpoints", "write", {"checkpoint": {}, "lease_epoch": 1}),
])
def test_the_quick_check_refuses_what_does_not_fit(port, op, args):
    from crashlab.world.boundary import _SHAPES

    assert not _SHAPES[port, op].fits(args) and argument_problems(port, op, args)


def test_what_the_reference_adapter_sends_fits_the_table():
    result = run(scenario(), "crashlab.reference_impl:ReferenceAdapter")
    calls = kinds(result, "call")
    assert len(calls) > 10
    assert [(c["port"], c["op"], argument_problems(c["port"], c["op"], c["args"])) for c in calls
            if argument_problems(c["port"], c["op"], c["args"])] == []
    assert not [e for e in kinds(result, "result") if (e.get("error") or {}).get("code") == "bad_request"]


# --------------------------------------------------------------------------- in-process and over the wire
@BOTH
def test_wait_ms_soon_is_answered_bad_request_and_the_adapter_goes_on(spec):
    result = run(registry_scenario(), spec("WaitsSoon"))
    [call] = [c for c in kinds(result, "call") if c["op"] == "wait_job"]
    [answer] = [r for r in kinds(result, "result") if r["call"] == call["seq"]]
    assert answer["error"]["code"] == "bad_request" and answer["error"]["details"]["field"] == "wait_ms"
    assert "registry.wait_job: wait_ms" in answer["error"]["message"]
    [finish] = kinds(result, "finish")
    assert finish["reason"] == "bad_request:wait_ms"
    assert not kinds(result, "adapter_fault")


@BOTH
@pytest.mark.parametrize("name, words", [("NonDictArgs", "args must be an object of named arguments, got list"),
                                         ("NonStringPort", "port must be a string, got list")])
def test_a_call_that_is_not_port_op_and_an_args_object_is_an_adapter_fault(spec, name, words):
    result = run(scenario(), spec(name))
    [fault] = kinds(result, "adapter_fault")
    assert fault["fault"] == "not_json" and words in fault["message"]
    assert check_run(result).verdict == "fail"


@pytest.mark.parametrize("name", ["WaitsSoon", "NonDictArgs", "NonStringPort"])
def test_the_cli_never_exits_6_on_wrong_shaped_arguments(tmp_path, capsys, name):
    path = tmp_path / "s.yaml"
    doc = {"id": "shapes", "title": "shapes", "clock": {"origin": "10:00", "horizon": "10:10"},
           "services": {"registry": {"job": "90s"}},
           "runs": [{"id": "run-pub", "service": "registry", "approval": {"mode": "none"},
                     "intent": {"tenant": "T-1", "package": "adc-cli", "version": "1.4.1", "principal": "U-7"}}]}
    path.write_text(json.dumps(doc))
    code = main(["run", str(path), "--adapter", f"boundary_adapters:{name}", "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "internal error" not in err and "Traceback" not in err


# --------------------------------------------------------------------------- fuzzing every port's arguments
def fuzz_scenario():
    # rules that read arguments as they match (a key's knowledge, a checkpoint's state, a disposition)
    return scenario(services=SERVICES, runs=[{"id": "run-82", "intent": dict(INTENT), "approval": {"mode": "none"}}],
                    faults=[{"match": {"port": "reservation", "op": "reserve", "knowledge": "SENT_UNKNOWN"},
                             "fault": "refused"}],
                    crashes=[{"match": {"port": "checkpoints", "op": "write", "state": "EFFECT_IN_FLIGHT"},
                              "boundary": "after"},
                             {"match": {"port": "run", "op": "finish", "disposition": "WAITING_HUMAN"},
                              "boundary": "before"}])


def fuzzed(calls, spec: str) -> tuple:
    """Run FuzzCalls making ``calls``; (the run's result, the answers of the first worker)."""
    with tempfile.TemporaryDirectory() as tmp:
        answers = Path(tmp) / "answers.jsonl"
        os.environ[CALLS_VAR], os.environ[ANSWERS_VAR] = json.dumps(calls), str(answers)
        before = os.environ.get("CRASHLAB_ISOLATION")
        os.environ["CRASHLAB_ISOLATION"] = "process"   # the adapter writes its answers here, outside its TMPDIR
        try:
            result = run(fuzz_scenario(), spec)
        finally:
            del os.environ[CALLS_VAR], os.environ[ANSWERS_VAR]
            if before is None:
                del os.environ["CRASHLAB_ISOLATION"]
            else:
                os.environ["CRASHLAB_ISOLATION"] = before
        lines = answers.read_text().splitlines() if answers.exists() else []
    return result, json.loads(lines[0]) if lines else None


def assert_held(result) -> None:
    """Every call was answered; each of the wrong shape with bad_request; the checks read the trace."""
    answered = {r["call"]: r for r in kinds(result, "result")}
    for call in kinds(result, "call"):
        if call["seq"] not in answered:
            continue  # a crash before it took effect, or the horizon
        if argument_problems(call["port"], call["op"], call["args"]):
            assert answered[call["seq"]]["error"]["code"] == "bad_request", call
    assert {f["fault"] for f in kinds(result, "adapter_fault")} <= set(RECORD_FAULTS)
    check_run(result)


CALLS = st.lists(port_calls().map(list), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CALLS)
def test_fuzz_argument_shapes_of_every_port_in_process(calls):
    result, _ = fuzzed(calls, "boundary_adapters:FuzzCalls")
    assert_held(result)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CALLS)
def test_fuzz_argument_shapes_of_every_port_over_the_wire_answers_as_in_process(calls):
    here, here_answers = fuzzed(calls, "boundary_adapters:FuzzCalls")
    wire, wire_answers = fuzzed(calls, over_the_wire("FuzzCalls"))
    assert_held(wire)
    assert wire_answers == here_answers
    assert [(e["kind"], e.get("error")) for e in wire.events[1:]] == [(e["kind"], e.get("error"))
                                                                       for e in here.events[1:]]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(ARGUMENTS)).flatmap(lambda po: st.tuples(st.just(po), arguments(*po))))
def test_fuzz_the_shape_check_answers_or_lets_through_never_raises_otherwise(drawn):
    (port, op), args = drawn
    problems = argument_problems(port, op, args)
    try:
        refuse_malformed(PortCall(port=port, op=op, args=args))
    except PortError as exc:
        assert problems and exc.code == "bad_request" and exc.details["field"] == problems[0][0]
        assert exc.message.startswith(f"{port}.{op}: ")
    else:
        assert not problems


@pytest.mark.parametrize("value", [{"now": 5, "ok": True, "owner": None, "name": "w1"}, {"epoch": 2**63 - 1},
                                   {"events": [{"seq": 1}]}, {"value": 1.5}, {}])
def test_a_result_reaches_the_adapter_as_a_copy_equal_to_the_json_round_trip(value):
    from crashlab.world.boundary import harness_value

    copy = harness_value(value)
    assert copy == json.loads(json.dumps(value)) and copy is not value
    if isinstance(copy, dict) and copy.get("events"):
        copy["events"][0]["seq"] = 99           # a nested object is a copy too: the world's stays
        assert value["events"][0]["seq"] == 1


def test_a_flat_result_copied_as_it_is_is_still_a_copy():
    from crashlab.world.boundary import harness_value

    stored = {"version": 3, "owner": "w1"}
    copy = harness_value(stored)
    copy["version"] = 99
    assert stored == {"version": 3, "owner": "w1"}


class ChangesTheErrorItWasThrown:
    """Catches a port's error and rewrites it: its details, its code, its message."""

    async def run(self, p):
        info = await p.run.info()
        lease = await p.lease.acquire(30_000)
        try:
            await p.checkpoints.write(checkpoint(info, lease, 1), 5, lease["epoch"])
        except PortError as exc:
            exc.details["latest"] = 99
            exc.details["forged"] = True
            exc.code, exc.message, exc.definite = "ok", "forged", False
        await p.run.finish("SUCCEEDED")


def test_an_error_thrown_to_an_in_process_adapter_is_its_own_copy_and_the_trace_keeps_the_error():
    """The adapter is thrown a new PortError with copied details: what it does to that error
    changes neither the trace's record of the answer nor the world's own error."""
    result = run(scenario(), "test_boundary:ChangesTheErrorItWasThrown")
    [error] = [e["error"] for e in kinds(result, "result") if not e["ok"]]
    assert error == {"code": "version_conflict", "definite": True, "message": error["message"],
                     "details": {"latest": 0}}
    assert "forged" not in error["message"]
    assert result.events == [json.loads(line) for line in result.world.trace.to_jsonl().splitlines()]


def test_the_error_an_adapter_is_thrown_equals_the_worlds_and_shares_nothing_with_it():
    from crashlab.world.boundary import harness_error

    error = PortError("version_conflict", "expected 1", details={"latest": 2, "problems": ["a"]})
    thrown = harness_error(error)
    assert thrown is not error and isinstance(thrown, PortError)
    assert thrown.to_json() == error.to_json() and str(thrown) == str(error)
    thrown.details["problems"].append("b")
    thrown.details["latest"] = 3
    assert error.details == {"latest": 2, "problems": ["a"]}

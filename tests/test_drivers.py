"""Both drivers: crashes and pauses at port-call boundaries, and a misbehaving adapter
becoming a recorded adapter fault (never a harness crash or hang)."""
import sys
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.run.drivers import load_adapter
from crashlab.vocab.errors import UsageError
from support import Script, effects, kinds, run, scenario

WIRE = Path(__file__).parent / "data" / "wire"
PY = sys.executable


def fault_of(result):
    [fault] = kinds(result, "adapter_fault")
    return fault


@pytest.mark.parametrize("adapter,kind,words", [
    ("bad_adapters:Raises", "exception", "KeyError"),
    ("bad_adapters:AwaitsNonPort", "not_a_port", "not a port call"),
    ("bad_adapters:ReturnsWithoutFinish", "no_finish", "without calling run.finish"),
    ("bad_adapters:LetsPortErrorEscape", "unhandled_port_error", "stale_epoch"),
    ("bad_adapters:NotAsync", "not_a_coroutine", "async def"),
])
def test_misbehaving_python_adapter_is_recorded(adapter, kind, words):
    fault = fault_of(run(scenario(), adapter))
    assert fault["fault"] == kind and words in fault["message"]


def test_infinite_loop_without_port_calls_hits_the_wall_guard():
    result = run(scenario(), "bad_adapters:SpinsWithoutAwaiting", wall_guard_s=0.2)
    assert fault_of(result)["fault"] == "step_timeout"


def test_infinite_loop_on_ports_hits_the_step_budget():
    result = run(scenario(), "bad_adapters:LoopsOnPorts", step_budget=300)
    fault = fault_of(result)
    assert fault["fault"] == "step_budget" and "300" in fault["message"]


def test_schema_invalid_checkpoint_is_an_adapter_fault_and_refused():
    result = run(scenario(), "bad_adapters:InvalidCheckpoint")
    fault = fault_of(result)
    assert fault["fault"] == "invalid_checkpoint"
    assert "control.state_version: missing" in fault["problems"]
    assert "control.owner: missing" in fault["problems"]
    assert kinds(result, "finish")[0]["reason"] == "invalid"
    assert not kinds(result, "checkpoint")


@pytest.mark.parametrize("script,kind,words", [
    ("garbage.py", "garbage", "not JSON"),
    ("dies.py", "died", "cannot continue"),
    ("bad_envelope.py", "garbage", "port/op"),
])
def test_misbehaving_subprocess_is_recorded(script, kind, words):
    fault = fault_of(run(scenario(), f"exec:{PY} {WIRE / script}"))
    assert fault["fault"] == kind and words in fault["message"]


def test_hung_subprocess_times_out():
    result = run(scenario(), f"exec:{PY} {WIRE / 'hangs.py'}", reply_timeout_s=0.5)
    assert fault_of(result)["fault"] == "no_reply"


def test_command_that_does_not_exist():
    fault = fault_of(run(scenario(), "exec:/nonexistent/adapter --x"))
    assert fault["fault"] == "died" and "cannot start" in fault["message"]


@pytest.mark.parametrize("spec,words", [
    ("nosuchmodule:X", "no module named 'nosuchmodule'"),
    ("wire:nosuchmodule:X", "--adapter 'wire:nosuchmodule:X': no module named 'nosuchmodule'"),
    ("wire:support", "--adapter 'wire:support': expected module:attribute"),
    ("support:NoSuchThing", "has no attribute 'NoSuchThing'"),
    ("support", "expected module:attribute"),
    ("exec:", "needs a command"),
])
def test_bad_adapter_spec_is_one_line(spec, words):
    with pytest.raises(UsageError) as err:
        load_adapter(spec)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_bad_adapter_spec_on_the_command_line(capsys, tmp_path):
    code = main(["run", "x.yaml", "--adapter", "nosuchmodule:X", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("\n") == 1 and "nosuchmodule" in err


def test_crash_before_the_call_means_it_never_happened():
    sc = scenario(crashes=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "before"}])
    result = run(sc)
    crash = kinds(result, "crash")[0]
    assert crash["boundary"] == "before"
    assert [e["t"] for e in effects(result)] and effects(result)[0]["t"] > crash["t"]
    assert len(effects(result)) == 1  # only the second worker's reserve


def test_crash_after_the_call_took_effect_loses_the_result():
    Script.SEEN.clear()
    sc = scenario(crashes=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "after"}])
    result = run(sc)
    undelivered = [e for e in kinds(result, "result") if e["delivered"] is False]
    assert len(undelivered) == 1 and undelivered[0]["ok"] is True
    assert effects(result)[0]["t"] < kinds(result, "crash")[0]["t"]
    # the second worker re-sent under the same key: the service replayed, one effect
    assert len(effects(result)) == 1 and kinds(result, "replayed")
    starts = kinds(result, "start")
    assert [s["number"] for s in starts] == [1, 2]


def test_a_crashed_requests_late_arrival_still_lands():
    sc = scenario(faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "fault": "late_arrival",
                           "delay": "40s"}],
                  crashes=[{"match": {"port": "run", "op": "finish", "nth": 1}, "boundary": "before"}])
    result = run(sc)
    assert kinds(result, "crash") and kinds(result, "late_arrival")
    assert effects(result)[0]["t"] > kinds(result, "crash")[0]["t"]


def test_pause_makes_a_zombie_that_is_fenced_by_epoch():
    Script.SEEN.clear()
    sc = scenario(pauses=[{"match": {"port": "checkpoints", "op": "load", "nth": 1}, "resume_after": "2m"}])
    result = run(sc)
    pause, resume = kinds(result, "pause")[0], kinds(result, "resume")[0]
    assert resume["t"] - pause["t"] == 120_000
    takeover = kinds(result, "takeover")[0]
    assert takeover["stale"] == "run-82/w1"
    leases = [e for e in kinds(result, "lease") if e["op"] != "release"]   # w2 releases at its finish
    assert [(e["worker"], e["epoch"]) for e in leases] == [("run-82/w1", 1), ("run-82/w2", 2)]
    rejected = kinds(result, "checkpoint_rejected")
    assert rejected and rejected[0]["worker"] == "run-82/w1"
    finishes = kinds(result, "finish")
    assert [(f["worker"], f["accepted"]) for f in finishes] == [("run-82/w2", True)]


def test_subprocess_crash_is_sigkill_and_a_fresh_process(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    sc = scenario(crashes=[{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "after"}])
    inproc = run(sc)
    wire = run(sc, f"exec:{PY} -m crashlab.run.wire support:Script")
    strip = lambda events: [{k: v for k, v in e.items() if k != "adapter"} for e in events]  # noqa: E731
    assert strip(inproc.events) == strip(wire.events)
    assert len(kinds(wire, "start")) == 2


def test_example_subprocess_adapter_runs():
    example = Path(__file__).parent.parent / "examples" / "minimal_adapter.py"
    result = run(scenario(), f"exec:{PY} {example}")
    assert not kinds(result, "adapter_fault")
    assert kinds(result, "finish")[0]["disposition"] == "SUCCEEDED"
    assert len(effects(result)) == 1


def test_durable_wait_wakes_on_an_inbox_event():
    class Waits:
        async def run(self, p):
            events = (await p.inbox.poll(0))["events"]
            if any(e["type"] == "cancel" for e in events):
                await p.run.finish("CANCELLED_NO_EFFECT")
            else:
                await p.run.finish("WAITING_HUMAN")

    import support
    support.Waits = Waits
    result = run(scenario(events=[{"at": "10:07", "type": "cancel"}]), "support:Waits")
    finishes = kinds(result, "finish")
    assert [f["disposition"] for f in finishes] == ["WAITING_HUMAN", "CANCELLED_NO_EFFECT"]
    assert finishes[1]["t"] >= 7 * 60_000


def test_arguments_must_be_json_values():
    fault = fault_of(run(scenario(), "bad_adapters:SendsNonJson"))
    assert fault["fault"] == "not_json" and "object" in fault["message"]


def test_calls_and_results_cross_by_value():
    result = run(scenario(), "bad_adapters:MutatesAfterSending")
    [cp] = kinds(result, "checkpoint")
    assert cp["state"] == "VALIDATED" and cp["checkpoint"]["control"]["state"] == "VALIDATED"
    assert kinds(result, "finish")[0]["reason"] == "VALIDATED run-82/w1"


def test_a_string_enum_crosses_the_boundary_as_its_value_on_every_path():
    """As JSON writes it (and as it arrives over the wire): the fast path and the careful one agree."""
    import enum
    import json

    from crashlab.world.boundary import adapter_value, json_copy

    class Colour(str, enum.Enum):
        RED = "red"

    fast = adapter_value({"c": Colour.RED})
    careful = adapter_value({"c": Colour.RED, "t": (1,)})        # a tuple takes the careful path
    assert fast == {"c": "red"} and careful == {"c": "red", "t": [1]}
    assert json_copy(Colour.RED) == json.loads(json.dumps(Colour.RED)) == "red"
    assert type(careful["c"]) is str

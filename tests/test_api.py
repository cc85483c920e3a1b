"""The public Python API: one flat, documented namespace, pinned here so that a change to it is
a deliberate one; and the wheel installs one top-level package, crashlab."""
import subprocess
import sys

import crashlab

EXPORTED = ["AdapterSpec", "ConformanceFailure", "CrashlabError", "InternalError", "Interrupted", "InvalidScenario",
            "Limits", "LostPoint", "NondeterminismDetected", "PortCall", "PortError", "Ports", "RunResult",
            "Scenario", "ScenarioResult", "Scorecard", "UsageError", "Violation", "check_adapter", "check_scenario",
            "check_trace", "library", "load_adapter", "load_scenario", "load_scenario_text", "merge", "read_trace",
            "resolve_scenario", "run_one", "run_scenario", "run_suite", "score", "sweep", "write_trace"]


def test_the_exported_names_are_pinned_and_resolve():
    assert crashlab.__all__ == EXPORTED
    for name in EXPORTED:
        assert getattr(crashlab, name) is not None, name


def test_importing_crashlab_is_light():
    code = ("import sys, crashlab; heavy = [m for m in ('simpy', 'networkx', 'matplotlib', 'hypothesis') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_user_runs_the_suite_and_a_scenario_through_the_api(tmp_path):
    card = crashlab.run_suite("crashlab.reference_impl:ReferenceAdapter",
                              [crashlab.resolve_scenario("t2-commit-before-record")], out_dir=tmp_path)
    # T2 alone passes, but exercises no cancellation (D2, among others): those points are not kept
    assert card.verdict == "unknown" and "D2" in card.not_exercised and card.lost == ()
    assert card.total == 20 - len(card.not_exercised) and card.score_text() != "20/20"
    assert card.scenarios[0].exercised and "CANCEL-01" not in card.scenarios[0].exercised
    [trace] = tmp_path.glob("*.jsonl")
    assert crashlab.check_trace(crashlab.read_trace(trace)).verdict == "pass"


def test_unknown_names_are_attribute_errors():
    try:
        crashlab.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no error")

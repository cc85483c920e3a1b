"""Old module paths keep working for one release, with a DeprecationWarning naming the new one."""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import crashlab
from crashlab._moved import MOVED

OLD = ['adapterspec', 'boundary', 'changelog', 'cli_args', 'conformance', 'crashpoints', 'drivers', 'errors', 'event_tables', 'events', 'exercised', 'explore', 'explore_coverage', 'faults', 'files', 'golden', 'integrate.card', 'integrate.repro', 'jobs', 'judge', 'model', 'movement', 'platform', 'ports', 'progress', 'results', 'ruleset', 'runner', 'scenario_compiled', 'scenario_format', 'scenario_loader', 'scenario_schema', 'scenario_yaml', 'services', 'strategies', 'sweep', 'terminal', 'timefmt', 'trace', 'transport', 'warm', 'wire']


def test_every_old_name_is_listed() -> None:
    assert sorted(MOVED) == OLD


@pytest.mark.parametrize("old", OLD)
def test_an_old_path_imports_the_new_module_with_a_warning(old: str) -> None:
    sys.modules.pop(f"crashlab.{old}", None)
    with pytest.warns(DeprecationWarning, match=f"crashlab.{old} moved to crashlab.{MOVED[old]}"):
        mod = importlib.import_module(f"crashlab.{old}")
    assert mod is importlib.import_module(f"crashlab.{MOVED[old]}")


def test_the_old_world_module_names_read_through_the_package() -> None:
    with pytest.warns(DeprecationWarning, match="crashlab.world.World moved to crashlab.world.world.World"):
        from crashlab.world import World
    from crashlab.world.world import World as new
    assert World is new


def test_from_import_and_mock_targets_reach_the_module_that_runs(monkeypatch) -> None:
    sys.modules.pop("crashlab.scenario_loader", None)
    vars(crashlab).pop("scenario_loader", None)       # an earlier import set it on the package
    with pytest.warns(DeprecationWarning):
        from crashlab import scenario_loader
    from crashlab.scenario import loader
    assert scenario_loader is loader
    monkeypatch.setattr("crashlab.results.failure_message", lambda *a: "patched")
    from crashlab.vocab import results
    assert results.failure_message() == "patched"


def test_no_file_is_left_at_an_old_place() -> None:
    from pathlib import Path
    top = Path(crashlab.__file__).parent
    assert not [o for o in MOVED if (top / (o.replace(".", "/") + ".py")).exists()]


def test_python_m_an_old_name_runs_the_new_module() -> None:
    out = subprocess.run([sys.executable, "-W", "ignore", "-c",
                          "import runpy, sys; sys.argv=['x', '--help']; runpy.run_module('crashlab.timefmt')"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_python_m_the_old_wire_runs_the_wire() -> None:
    out = subprocess.run([sys.executable, "-W", "default::DeprecationWarning", "-m", "crashlab.wire"], capture_output=True, text=True, timeout=120)
    assert "usage: python -m crashlab.run.wire" in out.stderr, out.stderr
    assert "crashlab.wire moved to crashlab.run.wire" in out.stderr


def test_new_paths_import_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for new in sorted(set(MOVED.values())):
            importlib.import_module(f"crashlab.{new}")

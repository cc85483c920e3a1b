"""Old module paths, kept for one release: ``crashlab.scenario_loader`` is ``crashlab.scenario.loader``.

A meta-path finder maps each old dotted name to its new module, warns once per import with a
DeprecationWarning naming the new path, and aliases ``sys.modules`` so both names are one module
object (``mock.patch("crashlab.sweep.x")`` patches the module that runs). ``python -m`` an old name
runs the new module. No file is left at an old place: the top level holds a dozen modules at most.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old name (below crashlab) -> new name
MOVED: dict[str, str] = {
    "adapterspec": "run.adapterspec",
    "boundary": "world.boundary",
    "changelog": "report.changelog",
    "cli_args": "cli.args",
    "conformance": "run.conformance",
    "crashpoints": "run.crashpoints",
    "drivers": "run.drivers",
    "errors": "vocab.errors",
    "event_tables": "vocab.event_tables",
    "events": "vocab.events",
    "exercised": "checks.exercised",
    "explore": "run.explore",
    "explore_coverage": "run.explore_coverage",
    "faults": "world.faults",
    "files": "vocab.files",
    "golden": "run.golden",
    "integrate.card": "checks.card",
    "integrate.repro": "run.repro",
    "jobs": "run.jobs",
    "judge": "run.judge",
    "model": "vocab.model",
    "movement": "report.movement",
    "platform": "world.platform",
    "ports": "world.ports",
    "progress": "report.progress",
    "results": "vocab.results",
    "ruleset": "rules.ruleset",
    "runner": "run.runner",
    "scenario_compiled": "vocab.compiled",
    "scenario_format": "scenario.format",
    "scenario_loader": "scenario.loader",
    "scenario_schema": "scenario.schema",
    "scenario_yaml": "scenario.yaml",
    "services": "world.services",
    "strategies": "scenario.strategies",
    "sweep": "run.sweep",
    "terminal": "cli.terminal",
    "timefmt": "vocab.timefmt",
    "trace": "world.trace",
    "transport": "world.transport",
    "warm": "run.warm",
    "wire": "run.wire",
}


def new_name(fullname: str) -> str | None:
    """``crashlab.scenario_loader`` -> ``crashlab.scenario.loader`` (None: not an old name)."""
    if not fullname.startswith("crashlab."):
        return None
    new = MOVED.get(fullname[len("crashlab."):])
    return f"crashlab.{new}" if new else None


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        pass

    def get_code(self, fullname: str):
        """``python -m crashlab.OLD``: run the new module as ``__main__`` (its own package, so its
        relative imports resolve)."""
        return compile(f"import runpy\nrunpy.run_module({self.new!r}, run_name='__main__', alter_sys=True)\n",
                       f"<{fullname}: moved to {self.new}>", "exec")

    def is_package(self, fullname: str) -> bool:
        return False


class OldNames(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; the old name goes away in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    if not any(isinstance(f, OldNames) for f in sys.meta_path):
        sys.meta_path.append(OldNames())

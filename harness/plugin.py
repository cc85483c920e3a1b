"""pytest plugin (entry point ``pytest11``): the conformance suite as pytest tests.

    pytest --crashlab-adapter=my_pkg.adapter:MyAdapter            # one test per library scenario
    pytest --crashlab-adapter=... --crashlab-crash-points         # plus one per crash point
    pytest tests/                                                 # collects *.crashlab.yaml files too

With ``--crashlab-adapter`` the suite ends with one more test, ``crashlab::rubric``: the
twenty-point rubric scored over every crashlab test that ran. It passes only when every point
was exercised and kept, as ``crashlab conformance`` exits 0 only then: a subset that leaves
points not exercised fails it (or xfails it, with ``--crashlab-inconclusive=xfail``), and the
summary line names them. Without ``--crashlab-adapter`` each test claims its own scenario only
and no rubric is scored. Users' own ``*.crashlab.yaml`` files are collected as tests, and the ``crashlab`` fixture
runs a scenario of their own against their adapter. The module imports nothing heavy until
a crashlab test actually runs.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

DEFAULT_ADAPTER = "crashlab.reference_impl:ReferenceAdapter"
#: the results of the crashlab tests that ran, and the rubric scored over them
_RESULTS = pytest.StashKey[list]()
_CARD = pytest.StashKey[object]()
_PLANTED = pytest.StashKey[str]()


def pytest_configure(config):
    """With ``--crashlab-adapter``, a session in an environment holding planted code (a ``.pth``
    file or site hook no installed package lists: crashlab.vocab.planted) is refused; without it, the
    check waits for the first crashlab test (an unrelated session pays nothing). The isolation
    asked for is set (:func:`_choose_isolation`)."""
    _choose_isolation(config)
    if config.getoption("crashlab_adapter", None) is not None:
        problem = _planted(config)
        if problem:
            raise pytest.UsageError(f"crashlab: {problem}")


def _planted(config) -> str:
    """What crashlab.vocab.planted refuses in this environment ('' if nothing), checked once."""
    if _PLANTED not in config.stash:
        from .vocab.errors import PlantedCode
        from .vocab.planted import refuse_planted
        try:
            refuse_planted()
            config.stash[_PLANTED] = ""
        except PlantedCode as exc:
            config.stash[_PLANTED] = str(exc)
    return config.stash[_PLANTED]


def _no_planted_code(config) -> None:
    problem = _planted(config)
    if problem:
        raise _Failed(f"crashlab: {problem}")


#: crashlab's processes in this pytest: pid -> its start time (a pid the system reuses is not ours)
_OURS = pytest.StashKey[dict]()


@contextmanager
def _adapters(config):
    """Around everything that runs adapters: pytest becomes a child subreaper (an adapter's detached
    grandchild is re-parented to pytest, not to init, once its worker is gone), and pytest's children
    that appear meanwhile are crashlab's: its worker processes, and what their adapters left that was
    re-parented to pytest. Nothing else runs in pytest's main thread while crashlab does, so these
    are not another plugin's; each is remembered (pid and start time) and killed, with everything
    below it, at the end of the session if it still runs (:func:`pytest_sessionfinish`)."""
    from .run.jobs import become_subreaper, children, started

    become_subreaper()
    before = set(children())
    try:
        yield
    finally:
        ours = config.stash.setdefault(_OURS, {})
        for pid in set(children()) - before:
            ours[pid] = started(pid)


def pytest_sessionfinish(session, exitstatus):
    """Kill what is left of crashlab's processes (:func:`_adapters`), and everything below them."""
    ours = session.config.stash.get(_OURS, None)
    if not ours:
        return
    from .run.jobs import kill_process_tree, started

    for pid, start in ours.items():
        if start is not None and started(pid) == start:
            kill_process_tree(pid)
    ours.clear()


def pytest_addoption(parser):
    group = parser.getgroup("crashlab", "crashlab conformance harness")
    group.addoption("--crashlab-adapter", action="store", default=None, metavar="SPEC",
                    help="run the conformance suite against SPEC (module:attribute or exec:COMMAND): "
                         "one test per library scenario")
    group.addoption("--crashlab-seed", action="store", type=int, default=None, metavar="N",
                    help="override every scenario's seed")
    group.addoption("--crashlab-crash-points", action="store_true", default=False,
                    help="also one test per crash point (before/after every port call) of every scenario")
    group.addoption("--crashlab-tag", action="append", default=None, metavar="TAG",
                    help="only library scenarios with this tag (repeatable)")
    group.addoption("--crashlab-scenario", action="append", default=None, metavar="ID",
                    help="only this library scenario (repeatable)")
    group.addoption("--crashlab-out", action="store", default=None, metavar="DIR",
                    help="save every trace as JSONL in DIR")
    group.addoption("--crashlab-inconclusive", action="store", choices=("fail", "xfail"), default="fail",
                    help="what an inconclusive scenario (verdict unknown), or a rubric with points no test "
                         "exercised (crashlab::rubric), is: a failure (default), or xfail")
    group.addoption("--crashlab-in-process", action="store_true", default=False,
                    help="debugging: run the adapter inside the pytest process (it can then end pytest or "
                         "change a verdict); by default it runs in a worker process and pytest checks its trace")
    from .run.isolate import MODES, OPTION_HELP

    group.addoption("--crashlab-isolation", action="store", choices=MODES, default=None,
                    help=OPTION_HELP.replace("exit 3", "a usage error"))
    parser.addini("crashlab_isolation", "the default of --crashlab-isolation (auto, namespaces or process)",
                  default="")


_ISOLATION_BEFORE = pytest.StashKey[tuple]()


def _choose_isolation(config) -> None:
    """``--crashlab-isolation`` (or the ``crashlab_isolation`` ini value) sets CRASHLAB_ISOLATION for
    the session and every worker it starts; the environment is put back when the session ends."""
    import os

    from .run import isolate

    mode = config.getoption("crashlab_isolation", None) or str(config.getini("crashlab_isolation") or "").strip()
    if mode:
        if mode not in isolate.MODES:
            raise pytest.UsageError(f"crashlab: crashlab_isolation = {mode[:40]!r} in the ini file is not one of "
                                    f"{', '.join(isolate.MODES)}")
        config.stash[_ISOLATION_BEFORE] = (os.environ.get(isolate.ENV),)
        isolate.choose(mode)


def pytest_unconfigure(config):
    import os

    from .run.isolate import ENV

    before = config.stash.get(_ISOLATION_BEFORE, None)
    if before is not None:
        if before[0] is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before[0]


def _isolation_text(config) -> str:
    """The header's words for the isolation the adapter's processes run under."""
    from .run import isolate
    from .run.drivers import load_adapter
    from .vocab.errors import CrashlabError

    try:
        spec = load_adapter(_adapter(config), import_code=False)
        return isolate.for_adapter(spec, in_process=_in_process(config)).line()
    except CrashlabError as exc:
        return f"isolation: {exc}"


def _adapter(config) -> str:
    return config.getoption("crashlab_adapter") or DEFAULT_ADAPTER


def pytest_report_header(config):
    if config.getoption("crashlab_adapter") is None:
        return None
    seed = config.getoption("crashlab_seed")
    return [f"crashlab: adapter {_adapter(config)}, seed {seed if seed is not None else 'per scenario'}"
            + (", in-process (untrusted: the adapter runs inside pytest)" if _in_process(config) else ""),
            f"crashlab: {_isolation_text(config)}"]


class CrashlabItem(pytest.Item):
    """One scenario (or one crash point of a scenario) against the adapter."""

    def __init__(self, *, scenario=None, document=None, **kw):
        super().__init__(**kw)
        self.scenario = scenario
        self.document = document
        self.result = None

    def runtest(self):
        from .run.conformance import failure_message, run_checked
        from .scenario.loader import from_dict
        from .vocab.files import check_written

        _no_planted_code(self.config)
        scenario = self.scenario or from_dict(self.document, file=str(self.path))
        out = self.config.getoption("crashlab_out")
        with _adapters(self.config):
            self.result = run_checked(scenario, _adapter(self.config), seed=self.config.getoption("crashlab_seed"),
                                      out_dir=Path(out) if out else None, in_process=_in_process(self.config))
        check_written([self.result.trace])   # the trace a failure names is still the one crashlab wrote
        self.config.stash.setdefault(_RESULTS, []).append(self.result)
        verdict(self.config, self.result, failure_message)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, _Failed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"crashlab: {self.name}"


def _in_process(config) -> bool:
    return bool(config.getoption("crashlab_in_process"))


def verdict(config, result, failure_message) -> None:
    """Pass only on a pass: a failure fails, and so does an inconclusive verdict (unless
    ``--crashlab-inconclusive=xfail``): a run that proved nothing is never green."""
    if result.verdict == "unknown":
        why = "inconclusive (verdict unknown): " + "; ".join(result.notes or ("no verdict",))
        if config.getoption("crashlab_inconclusive") == "xfail":
            pytest.xfail(why)
        raise _Failed(why + "\n" + failure_message(result))
    if result.verdict != "pass":
        raise _Failed(failure_message(result))


class _Failed(Exception):
    pass


class RubricItem(pytest.Item):
    """``crashlab::rubric``: the rubric over every crashlab test that ran before it (the last
    test of the session). Pass only when every point was exercised and kept."""

    def runtest(self):
        from .checks.rubric import score
        from .report.scorecard import unexercised_lines

        results = self.config.stash.get(_RESULTS, [])
        if not results:
            pytest.skip("no crashlab scenario ran: no rubric to score")
        card = score(results, adapter=_adapter(self.config), seed=self.config.getoption("crashlab_seed"))
        self.config.stash[_CARD] = card
        if card.verdict == "pass":
            return
        lines = [f"rubric {card.score_text()} over {len(results)} scenario(s): verdict {card.verdict}"]
        lost = list(dict.fromkeys(lp.point for lp in card.lost))
        if lost:
            lines.append(f"lost: {'; '.join(lost)} (the failing scenarios above name the findings)")
        if card.auto_fail:
            lines.append(f"automatic failure: {'; '.join(card.auto_fail)}")
        lines += unexercised_lines(card, "run the whole library (no --crashlab-tag or --crashlab-scenario)")
        why = "\n".join(lines)
        if card.verdict == "unknown" and self.config.getoption("crashlab_inconclusive") == "xfail":
            pytest.xfail(why)
        raise _Failed(why)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, _Failed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, "crashlab: rubric"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    card = config.stash.get(_CARD, None)
    if card is not None:
        terminalreporter.write_line(f"crashlab rubric: {card.score_text()}, verdict {card.verdict}")


class ConformanceSuite(pytest.Collector):
    def collect(self):
        from .run.explore import crash_documents
        from .run.drivers import load_adapter
        from .scenario.loader import library
        from .run.sweep import LocalExecutor, probe_all

        config = self.config
        scenarios = library()
        tags, ids = config.getoption("crashlab_tag"), config.getoption("crashlab_scenario")
        if tags:
            scenarios = [s for s in scenarios if set(tags) & set(s.tags)]
        if ids:
            scenarios = [s for s in scenarios if s.id in set(ids)]
        for sc in scenarios:
            yield CrashlabItem.from_parent(self, name=sc.id, scenario=sc)
        if config.getoption("crashlab_crash_points"):
            in_process = _in_process(config)
            adapter = load_adapter(_adapter(config), import_code=in_process, in_process=in_process)
            with _adapters(config):
                probes = probe_all(scenarios, adapter, LocalExecutor(1, in_process=in_process))
            for sc, calls in zip(scenarios, probes):
                for doc in crash_documents(sc, calls):
                    yield CrashlabItem.from_parent(self, name=doc["id"], document=doc)


class CrashlabFile(pytest.File):
    """A user's ``*.crashlab.yaml`` scenario, collected as one test."""

    def collect(self):
        from .scenario.loader import load_file

        scenario = load_file(self.path)
        yield CrashlabItem.from_parent(self, name=scenario.id, scenario=scenario)


def pytest_collect_file(parent, file_path):
    if file_path.name.endswith(".crashlab.yaml"):
        return CrashlabFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if config.getoption("crashlab_adapter") is None:
        return
    from .run.drivers import load_adapter
    from .vocab.errors import CrashlabError

    from .run.sweep import check_imports

    from .run.isolate import prepare

    try:
        prepare()   # namespaces asked for and not to be had: a usage error now; under auto, said once
        spec = load_adapter(_adapter(config), import_code=_in_process(config), in_process=_in_process(config))
        if not _in_process(config):
            check_imports(spec)
        suite = ConformanceSuite.from_parent(session, name="crashlab")
        suite_items = list(suite.collect())
    except CrashlabError as exc:
        raise pytest.UsageError(f"crashlab: {exc}") from None
    items[:0] = suite_items
    items.append(RubricItem.from_parent(suite, name="rubric"))   # last: it scores every crashlab test


class CrashlabFixture:
    """Run scenarios of your own against your adapter from a test."""

    def __init__(self, config, tmp_path: Path) -> None:
        self._config = config
        self._tmp = tmp_path

    @property
    def adapter(self) -> str:
        return _adapter(self._config)

    def load(self, scenario):
        from .vocab.compiled import Scenario
        from .scenario.loader import from_dict, load_file, resolve

        if isinstance(scenario, Scenario):
            return scenario
        if isinstance(scenario, dict):
            return from_dict(scenario, file="<dict>")
        path = Path(scenario)
        return load_file(path) if path.exists() else resolve(str(scenario))

    def run(self, scenario, adapter: str | None = None, seed: int | None = None):
        """Run (in a worker process) and check; return the ScenarioResult (its ``trace`` is saved
        under tmp_path)."""
        from .run.conformance import run_checked

        _no_planted_code(self._config)
        with _adapters(self._config):
            return run_checked(self.load(scenario), adapter or self.adapter, seed=seed, out_dir=self._tmp,
                               in_process=_in_process(self._config))

    def check(self, scenario, adapter: str | None = None, seed: int | None = None):
        """Run and raise AssertionError (ConformanceFailure) unless the verdict is pass."""
        from .run.conformance import check_scenario

        _no_planted_code(self._config)
        with _adapters(self._config):
            return check_scenario(self.load(scenario), adapter or self.adapter, seed=seed, out_dir=self._tmp,
                                  in_process=_in_process(self._config))


@pytest.fixture
def crashlab(request, tmp_path):
    """``crashlab.run(scenario)`` / ``crashlab.check(scenario)``: a library id, a YAML path, a
    scenario document (dict) or a Scenario, against ``--crashlab-adapter`` (default: the
    reference adapter) or the ``adapter=`` argument."""
    return CrashlabFixture(request.config, tmp_path)

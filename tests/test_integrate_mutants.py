"""The integration mutants (examples/integration/mutants.py): each careful worker with one
``--mistake`` fails on the integration card for the rules the chapter names, and the same worker
without it passes the same scenario. A mutant's ``gaps`` (a named rule an integration run does not
fail) are asserted too, so a check that starts catching one moves it to ``rules``. The runtime
mutants skip, naming the install command, where the runtime is not installed."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from runtime_support import no_leftovers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "integration"))
import mutants  # noqa: E402
import worker  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")
CHAPTER = Path("/work/shared/seeds/001_2fc32a313f08af14.txt")


def unavailable(runtime: str) -> str | None:
    """Why ``runtime`` cannot run here (with the command that installs it), None when it can."""
    if importlib.util.find_spec(mutants.MODULES[runtime]) is None:
        return f"{runtime} is not installed: {mutants.INSTALL[runtime]}"
    if runtime == "celery" and (shutil.which("redis-server") is None or importlib.util.find_spec("redis") is None):
        return f"celery needs redis: {mutants.INSTALL['celery']}"
    if runtime == "temporal" and not ((Path(sys.executable).parent / "temporal").exists() or shutil.which("temporal")):
        return f"Temporal's dev server is not installed: {mutants.INSTALL['temporal']}"
    if runtime == "restate":
        from crashlab.vocab.errors import UsageError
        from crashlab.runtimes.restate import server_binary

        try:
            server_binary()
        except UsageError:
            return f"Restate's server is not installed: {mutants.INSTALL['restate']}"
    return None


def test_every_mutant_is_one_flag_of_a_careful_worker_and_names_its_passage():
    ids = [m.id for m in mutants.MUTANTS]
    assert len(ids) == len(set(ids))
    for m in mutants.MUTANTS:
        assert m.mistake in worker.MISTAKES, m.id
        assert m.quote.rstrip(".") and m.section and m.scenarios, m.id
    if CHAPTER.exists():                  # the passages are quoted verbatim
        text = CHAPTER.read_text()
        for m in mutants.MUTANTS:
            assert m.quote in text and m.section in text, m.id
    # the runtime workers: at least two mistakes each
    for rt in mutants.WORKERS[1:]:
        assert sum(m.worker == rt for m in mutants.MUTANTS) >= 2, rt


def test_the_rules_the_chapter_names_are_required_not_gaps():
    """LATE-01 (a callback taken as confirmation), RETRY-01 (a resend on a temporarily negative read to a
    keyless service) and EVT-02 (a duplicate dropped silently) are the rules the chapter names, and the
    card fails each: no mutant is left with a gap."""
    by_id = {m.id: m for m in mutants.MUTANTS}
    assert {"LATE-01", "KNOW-02", "TRUTH-01"} <= set(by_id["plain-callback-confirms"].rules)
    assert {"RETRY-01", "REC-01", "EFF-01"} <= set(by_id["plain-early-negative-read"].rules)
    assert by_id["plain-unrecorded-duplicates"].rules == ("EVT-02",)
    assert [m.id for m in mutants.MUTANTS if m.gaps] == []


def test_writing_the_table_keeps_the_rows_of_the_workers_not_run(tmp_path):
    page = tmp_path / "page.md"
    old = "| `dbos-blind-retry` | `blind_retry` | `s` | R | R | fail 3/3 | 3 |"
    stale = "| `plain-blind-retry` | `blind_retry` | `s` | R | nothing | pass 3/3 | 3 |"
    page.write_text(f"intro\n{mutants.BEGIN}\n| h |\n|---|\n{stale}\n{old}\n{mutants.END}\noutro\n")
    fresh = "| `plain-blind-retry` | `blind_retry` | `s` | R | R | fail 3/3 | 3 |"
    mutants.write(page, f"| h |\n|---|\n{fresh}\n")
    assert page.read_text() == f"intro\n{mutants.BEGIN}\n| h |\n|---|\n{fresh}\n{old}\n{mutants.END}\noutro\n"


def test_an_unknown_mistake_is_a_usage_error_not_a_traceback(tmp_path, capsys):
    assert worker.main(["http://127.0.0.1:1/w/x", str(tmp_path / "db"), "--mistake=nonsense"]) == 2
    assert "usage: worker.py" in capsys.readouterr().err


@pytest.fixture
def out(tmp_path):
    yield tmp_path
    no_leftovers(str(tmp_path))


def _judged(m, out, **runtime):
    (found,) = mutants.measure(m, out, marker=str(out), **runtime)
    return found


def _assert_caught(m, found):
    assert not found.missing, f"{m.id} on {found.scenario}: {found.verdict}, failed {found.failed}; " \
                              f"not caught by {found.missing}"
    if m.rules:
        assert found.verdict == "fail", found
    for gap in m.gaps:     # a gap that closes must move to rules (and the docs page's table with it)
        assert gap not in found.failed, f"{m.id}: {gap} now catches it; move it from gaps to rules"


def _skip_without_faketime(*names: str) -> None:
    """A scenario whose worker runs on a skewed clock (worker_clocks) needs libfaketime: skip, saying so."""
    from crashlab.integrate import clocks

    if clocks.library() is None and any(mutants.scenario_of(n).worker_clocks for n in names):
        pytest.skip(f"libfaketime is not installed ({clocks.INSTALL}): the scenario skews a worker's clock")


@pytest.mark.parametrize("m", mutants.PLAIN, ids=lambda m: m.id)
def test_a_plain_mutant_fails_for_the_rules_the_chapter_names(out, m):
    _skip_without_faketime(*m.scenarios)
    _assert_caught(m, _judged(m, out))


@pytest.mark.parametrize("name", sorted({sc for m in mutants.PLAIN for sc in m.scenarios}))
def test_without_the_mistake_the_careful_worker_passes_the_same_scenario(out, name):
    from crashlab.integrate.run import integrate

    _skip_without_faketime(name)

    cmd = f"{sys.executable} {ROOT / 'examples' / 'integration' / 'worker.py'} {{url}} {{db}} --out-marker={out}"
    sc = mutants.scenario_of(name)
    outcome = integrate(sc, worker=cmd, out=out, worker_next=cmd if any(ev.type == "deploy" for ev in sc.events)
                        else None)
    assert outcome.card.verdict == "pass", outcome.card.text()


RUNTIME_MUTANTS = [m for m in mutants.MUTANTS if m.runtime is not None]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    started: dict = {}
    yield lambda rt: started.get(rt) or started.setdefault(rt, _start(rt, tmp_path_factory.mktemp(rt)))
    for rt, (runtime, server, work) in started.items():
        server.stop()
        no_leftovers(str(work))


def _start(rt, work):
    from crashlab.runtimes import load

    runtime = load(rt)
    return runtime, runtime.start(work / "runtime"), work


@pytest.mark.parametrize("m", RUNTIME_MUTANTS, ids=lambda m: m.id)
def test_a_runtime_mutant_fails_for_the_rules_the_chapter_names(servers, m):
    why = unavailable(m.runtime)
    if why:
        pytest.skip(why)
    runtime, server, work = servers(m.runtime)
    found = _judged(m, work / m.id, runtime=runtime, server=server)
    if found.missing:
        # a real runtime's own retry timing under a loaded machine: once (seen on a CI run, Temporal's
        # activity retry came after the worker had finished); a mistake that is caught is caught every time
        # it happens, and a second miss fails
        found = _judged(m, work / f"{m.id}-again", runtime=runtime, server=server)
    _assert_caught(m, found)

"""Exploration of the reference adapter: the crash laboratory done exhaustively, double
crashes, and generated fault schedules (crashes, pauses, transport and store faults,
duplicated and reordered input events), all judged by the generic invariants alone.

The crash matrix and the double crashes run in two worker processes in the background
(started by the module fixture) while the generated schedules run here; a test per library
scenario keeps a failure readable. docs/exploration.md has the bigger runs.
"""
from __future__ import annotations

import math
import multiprocessing
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from crashlab.cli import main
from crashlab.run.conformance import check_run
from crashlab.run.drivers import load_adapter
from crashlab.run.explore import (check_document, crash_documents, double_crash_documents, probe_calls,
                             to_yaml)
from crashlab.run.runner import run_scenario
from crashlab.scenario import from_dict, library, load_file
from crashlab.scenario.strategies import schedules

sys.path.insert(0, str(Path(__file__).parent / "data" / "checks"))

ADAPTER = "crashlab.reference_impl:ReferenceAdapter"
LIBRARY = {s.id: s for s in library()}
#: At least 2,000 generated schedules in all, shared evenly among the library's scenarios.
EXAMPLES_PER_BASE = math.ceil(2000 / len(LIBRARY))
BUGS = Path(__file__).parent / "data" / "checks" / "reference_bugs"


class KnownReferenceBug(AssertionError):
    """Raised when the only violations found are those of a known reference-adapter bug."""


#: Reference-adapter bugs that generated schedules reproduce on a base scenario: the base,
#: the invariants the bug violates there, and the bug (tests/data/checks/reference_bugs/
#: holds a minimal scenario for each). Only these invariants are tolerated on that base.
KNOWN_REFERENCE_BUGS: dict[str, tuple[frozenset[str], str]] = {}


def _failure(doc: dict, res) -> str:
    lines = [f"{v.invariant}: {v.message} [evidence {', '.join(f'#{e}' for e in v.events)}]"
             for v in res.violations]
    return "\n".join(lines) + "\n--- the schedule (save as FILE.yaml; crashlab run FILE.yaml):\n" + to_yaml(doc)


# --------------------------------------------------------------------------- the crash laboratory
def _crash_failures(docs: list[dict], source: str | None) -> list[str]:
    """Run in a worker process: every document of one scenario, the failures as text."""
    failures = []
    for doc in docs:
        res = check_document(doc, source, ADAPTER)
        if res.verdict != "pass":
            failures.append(f"{doc['id']}: {res.verdict}\n" + _failure(doc, res) + "\n".join(res.notes))
    return failures


@pytest.fixture(scope="module", autouse=True)
def crash_laboratory():
    """Per (scenario id, "single" | "double"): the pending failures of a crash before and
    after every port call, and of two crashes at every durable call (the second while
    recovery redoes it), computed by two worker processes while the other tests run."""
    spec = load_adapter(ADAPTER)
    pool = multiprocessing.get_context("fork").Pool(2)
    pending = {}
    for sid, scenario in LIBRARY.items():
        calls = probe_calls(scenario, spec)
        pending[(sid, "single")] = pool.apply_async(_crash_failures, (list(crash_documents(scenario, calls)),
                                                                       scenario.source))
        pending[(sid, "double")] = pool.apply_async(_crash_failures, (list(double_crash_documents(scenario, calls)),
                                                                       scenario.source))
    pool.close()
    yield pending
    pool.terminate()
    pool.join()


# --------------------------------------------------------------------------- generated schedules
def _bases():
    for sid in LIBRARY:
        known = KNOWN_REFERENCE_BUGS.get(sid)
        marks = [pytest.mark.xfail(strict=True, raises=KnownReferenceBug, reason=known[1])] if known else []
        yield pytest.param(sid, marks=marks, id=sid)


@pytest.mark.parametrize("base", list(_bases()))
def test_generated_schedules_violate_no_invariant(base):
    scenario = LIBRARY[base]
    spec = load_adapter(ADAPTER)
    tolerated = KNOWN_REFERENCE_BUGS.get(base, (frozenset(), ""))[0]
    known_hits: list[str] = []
    tried = []

    @settings(max_examples=EXAMPLES_PER_BASE, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(schedules(dict(scenario.raw), probe_calls(scenario, spec)))
    def schedule_passes(doc):
        tried.append(doc["seed"])
        res = check_run(run_scenario(from_dict(doc), spec))
        assert res.verdict != "unknown", "inconclusive: " + "; ".join(res.notes) + "\n" + to_yaml(doc)
        unknown = [v for v in res.violations if v.invariant not in tolerated]
        assert not unknown, _failure(doc, res)
        if res.violations:
            known_hits.append(_failure(doc, res))

    schedule_passes()
    assert len(tried) >= EXAMPLES_PER_BASE // 2, f"only {len(tried)} schedules were generated"
    if known_hits:
        raise KnownReferenceBug(f"{len(known_hits)} schedule(s) reproduce the known bug; the first:\n"
                                + known_hits[0])


def test_a_blind_resend_is_found_shrunk_and_printed_as_a_scenario_that_reproduces_it(tmp_path):
    saved = tmp_path / "found.yaml"
    # in a process of its own, as a user runs it: hypothesis draws from the constants of the modules
    # loaded in the process, so the same seed inside a long test session may draw other schedules
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "data" / "checks"),
                                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "crashlab", "explore", "--adapter", "blind_resend:BlindResend",
                           "--base", "matrix-timeout-before-send", "--examples", "300", "--seed", "1",
                           "--save", str(saved), "--findings", str(tmp_path / "f")],
                          capture_output=True, text=True, env=env, timeout=900)
    code, out = proc.returncode, proc.stdout
    assert code == 1, out + proc.stderr
    text = saved.read_text(encoding="utf-8")
    assert text in out and f"crashlab run {saved}" in out
    # every distinct failure is a finding; the blind resend is one of them (the schedules also draw
    # definite refusals, which this adapter re-sends too: CLS-01, found as well)
    findings = {p: p.read_text(encoding="utf-8") for p in sorted((tmp_path / "f").glob("*.yaml"))}
    blind = [t for t in findings.values() if "RETRY-01" in t.splitlines()[0]]
    assert blind and any("CLS-01" in t.splitlines()[0] for t in findings.values()), list(findings)
    doc = yaml.safe_load(blind[0])
    base = yaml.safe_load(Path(LIBRARY["matrix-timeout-before-send"].source).read_text(encoding="utf-8"))
    # shrunk: one fault beyond the base's own, nothing else
    assert len(doc["faults"]) == len(base["faults"]) + 1
    assert not doc["crashes"] and not doc["pauses"] and not doc["events"]
    saved.write_text(blind[0], encoding="utf-8")
    found = check_run(run_scenario(load_file(saved), "blind_resend:BlindResend"))
    retry = [v for v in found.violations if v.invariant == "RETRY-01"]
    # blind, though the base's service deduplicates the same key: it costs C3, not the score
    assert retry and retry[0].auto_fail is None and "cannot duplicate" in retry[0].message
    # the same schedule against the same adapter without the mistake passes
    assert check_run(run_scenario(load_file(saved), "blind_resend:Careful")).verdict == "pass"


def test_explore_writes_nothing_into_the_current_directory(tmp_path):
    """hypothesis caches what it draws from; its folder lives under the findings folder."""
    here, findings = tmp_path / "here", tmp_path / "out"
    here.mkdir()
    done = subprocess.run([sys.executable, "-m", "crashlab", "explore", "--adapter",
                           "crashlab.gallery.retries:BlindRetry", "--base", "t2-commit-before-record",
                           "--examples", "5", "-q", "--findings", str(findings)],
                          cwd=here, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    assert list(here.iterdir()) == []
    assert (findings / ".hypothesis").is_dir()


# --------------------------------------------------------------------------- the crash matrix, read back
@pytest.mark.parametrize("scenario_id", list(LIBRARY))
def test_a_crash_before_or_after_any_port_call_violates_no_invariant(scenario_id, crash_laboratory):
    failures = crash_laboratory[(scenario_id, "single")].get()
    assert not failures, f"{len(failures)} crash point(s) fail; the first:\n{failures[0]}"


@pytest.mark.parametrize("scenario_id", list(LIBRARY))
def test_a_second_crash_during_recovery_violates_no_invariant(scenario_id, crash_laboratory):
    failures = crash_laboratory[(scenario_id, "double")].get()
    assert not failures, f"{len(failures)} double crash(es) fail; the first:\n{failures[0]}"


# --------------------------------------------------------------------------- recorded schedules
SCHEDULES = Path(__file__).parent / "data" / "checks" / "schedules"


@pytest.mark.parametrize("path", sorted(SCHEDULES.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_schedule_that_once_made_a_correct_run_look_wrong_passes(path):
    """Generated schedules on which a check used to blame the reference adapter wrongly; its
    title says which decision of the checks each one pins."""
    res = check_run(run_scenario(load_file(path), ADAPTER))
    assert res.verdict == "pass", _failure(yaml.safe_load(path.read_text(encoding="utf-8")), res)


def _bug(path: Path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    reason = "reference bug: " + " ".join(doc["description"].split())
    return pytest.param(path, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason),
                        id=path.stem)


@pytest.mark.parametrize("path", [_bug(p) for p in sorted(BUGS.glob("*.yaml"))])
def test_a_recorded_reference_bug_scenario_passes(path):
    """A minimal scenario per reference-adapter bug found by exploration (its description says
    what goes wrong and which invariant catches it). Strict: once the adapter is fixed this
    passes and the marker must go (move the scenario to the recorded schedules)."""
    res = check_run(run_scenario(load_file(path), ADAPTER))
    assert res.verdict == "pass", _failure(yaml.safe_load(path.read_text(encoding="utf-8")), res)


def test_the_crash_matrix_command_prints_each_failing_schedule_and_a_summary(capsys):
    from crashlab.run.explore import matrix_main

    assert matrix_main(["--scenario", "matrix-permission-denied", "--double"]) == 0
    assert re.fullmatch(r"[1-9]\d* double-crash schedules over 1 scenario\(s\): 0 failing",
                        capsys.readouterr().out.strip())
    assert matrix_main(["--adapter", "blind_resend:BlindResend", "--scenario", "matrix-ambiguous-effect"]) == 1
    out = capsys.readouterr().out
    first = yaml.safe_load(out.split("--- ", 1)[1].split("\n", 1)[1].split("scenario ", 1)[0])
    assert first["crashes"] and "RETRY-01" in out
    assert out.rstrip().endswith("failing") and " 0 failing" not in out


def test_generated_schedules_draw_the_new_kinds():
    """409s, duplicated callbacks, late events and cancellations anchored to the adapter's own calls."""
    base = LIBRARY["t2-commit-before-record"]
    calls = probe_calls(base, load_adapter(None))
    seen = {"anchored": 0, "conflict": 0, "callback": 0}

    # derandomized: the same 300 schedules on every run (a random run drew no callback once)
    @settings(max_examples=300, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(schedules(dict(base.raw), calls))
    def draw(doc):
        events = doc.get("events") or []
        seen["anchored"] += any(isinstance(e.get("at"), dict) and e.get("type") == "cancel" for e in events)
        seen["conflict"] += any(f.get("code") == "conflict_in_flight" for f in doc.get("faults") or [])
        seen["callback"] += any(e.get("type") == "callback" for e in events)
        from_dict(doc, file="generated.yaml")  # every drawn schedule is a valid scenario

    draw()
    assert all(seen.values()), seen

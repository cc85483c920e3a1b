"""The crash matrix crashes every run of every scenario, not only the first.

A crash rule matches a call by (port, op, nth), and ``nth`` counts a *run's* calls, so the
second run of a scenario repeats the first run's ordinals; a crash point without its run fires
in the first run that reaches it and the second run is never crashed.
"""
from __future__ import annotations

import pytest

from crashlab.run.drivers import load_adapter
from crashlab.run.explore import crash_documents, double_crash_documents, probe_calls, probe_points
from crashlab.run.runner import run_scenario
from crashlab.scenario.loader import from_dict, library
from crashlab.run.sweep import Coverage, LocalExecutor, crash_jobs

SPEC = load_adapter(None)
MULTI = [sc for sc in library() if len(sc.runs) > 1]


def _crashed_runs(doc: dict, source) -> set[str]:
    result = run_scenario(from_dict(doc, file=source), SPEC)
    return {e["run"] for e in result.events if e["kind"] == "crash"}


def test_the_library_has_multi_run_scenarios():
    assert len(MULTI) >= 3


@pytest.mark.parametrize("scenario", MULTI, ids=lambda sc: sc.id)
def test_every_run_has_crash_points_and_each_fires_in_its_own_run(scenario):
    points = probe_points(scenario, SPEC)
    runs = {sc_run.id for sc_run in scenario.runs}
    probed_runs = {p[0] for p in points}
    called = {e["run"] for e in run_scenario(scenario, SPEC).events if e["kind"] == "call" and e["lane"] == "port"}
    assert probed_runs == called and called <= runs
    # the last crash point of each run fires in that run, not in another one
    for run in sorted(probed_runs):
        last = [p for p in points if p[0] == run][-1]
        doc = [d for d in crash_documents(scenario, [last]) if d["id"].endswith("-after")][0]
        assert _crashed_runs(doc, scenario.source) == {run}, doc["id"]


def test_run_blind_crash_points_miss_a_run_that_run_aware_ones_reach():
    """The defect this guards against: the run-blind points of a multi-run scenario crash only
    the run that reaches an ordinal first."""
    missed = 0
    for scenario in MULTI:
        blind = {r for doc in crash_documents(scenario, probe_calls(scenario, SPEC))
                 for r in _crashed_runs(doc, scenario.source)}
        aware = {p[0] for p in probe_points(scenario, SPEC)}
        assert blind <= aware
        missed += len(aware - blind)
    assert missed > 0


def test_one_run_scenarios_keep_their_crash_documents():
    scenario = next(sc for sc in library() if len(sc.runs) == 1)
    assert list(crash_documents(scenario, probe_points(scenario, SPEC))) == \
        list(crash_documents(scenario, probe_calls(scenario, SPEC)))
    assert all("run" not in rule["match"] for doc in double_crash_documents(scenario, probe_points(scenario, SPEC))
               for rule in doc["crashes"])


def test_sweep_reports_the_coverage_it_reached():
    reached: list[Coverage] = []
    jobs = crash_jobs(MULTI[:2], SPEC, double=False, executor=LocalExecutor(1, in_process=True), coverage=reached)
    cov = reached[0]
    assert cov.runs == sum(len(sc.runs) for sc in MULTI[:2])
    assert cov.runs_crashed == cov.runs
    assert cov.jobs == len(jobs) == 2 * cov.calls
    assert f"{cov.runs_crashed} of {cov.runs} runs" in cov.text()
    aimed = {(job.base, rule["match"].get("run")) for job in jobs for rule in job.document()["crashes"][-1:]}
    assert aimed == {(sc.id, run.id) for sc in MULTI[:2] for run in sc.runs
                     if any(p[0] == run.id for p in probe_points(sc, SPEC))}


@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
def test_a_sweeps_jobs_share_their_base_document_and_build_the_crash_points_own(double):
    """A sweep's jobs are built before its workers fork, so each worker holds them all: one document
    per base scenario, shared by its crash points, keeps that memory from growing with the number
    of crash points. Each job still runs exactly the document the crash matrix makes for it."""
    scenario = MULTI[0]
    jobs = crash_jobs([scenario], SPEC, double=double, executor=LocalExecutor(1, in_process=True))
    make = double_crash_documents if double else crash_documents
    expected = list(make(scenario, probe_points(scenario, SPEC)))
    assert len(jobs) == len(expected) > 2
    assert len({id(job.doc) for job in jobs}) == 1                  # one base document for all of them
    assert [job.document() for job in jobs] == expected             # the same documents, ids and crash rules
    first = jobs[0].document()
    first["crashes"][-1]["match"]["nth"] = 999                      # a built document is the job's own copy
    first["runs"][0]["id"] = "changed"
    assert jobs[0].document() == expected[0] and jobs[1].document() == expected[1]

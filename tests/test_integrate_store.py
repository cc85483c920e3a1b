"""Integration runs judged in the scenario's own units, and stores that never collide or lose a file:
a throttle's retry-after compared on the scenario clock, database names that fit PostgreSQL's 63 bytes
and differ per suite, and an input file never deleted."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from crashlab.integrate.run import integrate
from crashlab.scenario_loader import load_file

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "examples" / "integration" / "worker.py"


def careful(mistake: str = "") -> str:
    return f"{sys.executable} {WORKER} {{url}} {{db}} {mistake}".strip()


@pytest.fixture()
def long_throttle(tmp_path):
    """matrix-throttling with one 180 s retry-after: 1.8 s of real time at scale 100, so a worker that
    waits a fifth of it resends about 36 s of scenario time later, whatever the machine's load."""
    data = yaml.safe_load((ROOT / "scenarios" / "matrix-throttling.yaml").read_text())
    data.update(id="long-throttle", faults=[{"match": {"port": "reservation", "op": "reserve"},
                                             "fault": "throttled", "delay": "180s", "times": 1}])
    path = tmp_path / "long-throttle.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_file(path)


def _failing(outcome) -> set[str]:
    return {line.invariant for line in outcome.card.lines if line.status == "fail"}


def test_a_resend_before_the_retry_after_in_scenario_time_fails_cls02(long_throttle, tmp_path):
    outcome = integrate(long_throttle, worker=careful("--mistake=short_throttle_wait"), out=tmp_path / "o")
    assert "CLS-02" in _failing(outcome), outcome.card.text()
    events = [json.loads(line) for line in outcome.trace.read_text().splitlines()]
    results = [e for e in events if e.get("kind") == "result" and not e.get("ok")]
    assert results[0]["error"]["details"]["retry_after_ms"] == 180_000    # the trace keeps scenario time


def test_a_resend_after_the_retry_after_keeps_cls02(long_throttle, tmp_path):
    outcome = integrate(long_throttle, worker=careful(), out=tmp_path / "o")
    assert "CLS-02" not in _failing(outcome), outcome.card.text()
    assert outcome.card.verdict == "pass", outcome.card.text()

"""Python adapters over the wire through the warm process server (``wire:module:Class``):
the same traces as a fresh interpreter per worker, one process per worker, nothing left behind."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.run.drivers import load_adapter
from crashlab.vocab.errors import UsageError
from crashlab.scenario import resolve
from support import kinds, run, scenario

HERE = Path(__file__).parent
ROOT = HERE.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}


@pytest.mark.parametrize("name", ["t2-commit-before-record", "matrix-lease-loss", "t4-approval-wait-crash"])
def test_the_warm_server_gives_the_same_trace_as_a_fresh_interpreter(name):
    sc = resolve(name)
    warm = run(sc, "wire:crashlab.reference_impl:ReferenceAdapter").to_jsonl().splitlines()
    cold = run(sc, f"exec:{sys.executable} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter").to_jsonl().splitlines()
    assert warm[1:] == cold[1:] and len(kinds(run(sc, "wire:crashlab.reference_impl:ReferenceAdapter"), "start")) >= 1


def test_every_worker_is_a_fresh_process(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    result = run(scenario(), "wire:hostile_adapters:RemembersAcrossWorkers")
    sleeps = [e["args"]["reason"] for e in kinds(result, "call") if e["op"] == "sleep"]
    assert sleeps and set(sleeps) == {"workers seen in this process: 1"}
    faults = kinds(result, "adapter_fault")
    assert faults and faults[0]["fault"] == "exception"


def test_base_exceptions_are_faults_through_the_warm_server(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    [fault] = kinds(run(scenario(), "wire:hostile_adapters:RaisesSystemExit0"), "adapter_fault")
    assert fault["fault"] == "base_exception"


def test_nothing_is_left_running_after_the_command():
    proc = subprocess.run([sys.executable, "-m", "crashlab", "conformance", "-q", "-j", "2", "--adapter",
                           "wire:crashlab.reference_impl.adapter:ReferenceAdapter", "--tag", "trace", "--out", "/tmp/crashlab-warm-test"],
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    left = subprocess.run(["pgrep", "-f", "crashlab.run.warm crashlab.reference_impl.adapter:ReferenceAdapter"], capture_output=True,
                          text=True).stdout.split()
    assert not left


@pytest.mark.parametrize("spec, words", [("wire:no_such_module:X", "no module"),
                                          ("wire:exec:python x.py", "Python adapter")])
def test_bad_wire_specs_are_usage_errors(spec, words):
    with pytest.raises(UsageError, match=words):
        load_adapter(spec)

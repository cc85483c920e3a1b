"""The reference adapter, wrapped as a subprocess speaking the wire protocol, produces the
same traces and the same verdicts as in-process, on every library scenario."""
import sys

import pytest

from crashlab.run.conformance import check_run
from crashlab.run.drivers import load_adapter
from crashlab.run.runner import run_scenario
from crashlab.scenario import library

INPROC = load_adapter("crashlab.reference_impl:ReferenceAdapter")
WIRE = load_adapter(f"exec:{sys.executable} -m crashlab.run.wire crashlab.reference_impl:ReferenceAdapter")


def _without_adapter_name(events):
    head = dict(events[0])
    head.pop("adapter")
    return [head, *events[1:]]


@pytest.mark.parametrize("scenario", library(), ids=lambda s: s.id)
def test_same_trace_and_verdict_over_the_wire(scenario):
    local = run_scenario(scenario, INPROC)
    remote = run_scenario(scenario, WIRE)
    assert _without_adapter_name(remote.events) == _without_adapter_name(local.events)
    a, b = check_run(local), check_run(remote)
    assert (b.verdict, b.dispositions, b.violations) == (a.verdict, a.dispositions, a.violations)

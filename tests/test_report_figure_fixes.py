"""The figure says what happened in time and truth: merged break labels state the time of
their whole stretch, an escalation is not hidden under the finish, an end state the service
contradicts is marked, and a failing adapter's violation list never runs over the legend or
cuts a word."""
from __future__ import annotations

import re

import pytest

from crashlab.checks import check_trace
from crashlab.report.axis import Break, break_groups, break_label
from crashlab.report.figure import RC, _Figure, build_figure, matplotlib
from crashlab.report.lanes import lanes
from crashlab.run.runner import run_scenario
from crashlab.scenario.loader import resolve
from test_report_figures import text_problems


def test_breaks_whose_labels_collide_share_one_label_with_the_whole_stretch():
    near = [Break(0, 150_000, 10.0, 12.6), Break(150_100, 600_000, 13.0, 15.6)]
    far = Break(700_000, 760_000, 60.0, 62.6)
    groups = break_groups(near + [far], lambda label: len(label) * 0.6)
    assert groups == [near, [far]]
    assert break_label(near) == "≈10 min, 2 breaks"          # not "≈2.5 min" for a ten-minute gap
    assert break_label([far]) == "≈1 min"
    assert [b for g in groups for b in g] == near + [far]


def texts(fig) -> list[str]:
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text)]


def figure(scenario: str, adapter: str):
    events = run_scenario(resolve(scenario), adapter).events
    with matplotlib().rc_context(RC):
        drawing = _Figure(events, check_trace(events), lanes(events))
        fig = drawing.build()
    return events, drawing, fig


def test_an_escalation_at_the_finish_stays_visible():
    events, drawing, _ = figure("t8-compensation-failure", "crashlab.reference_impl:ReferenceAdapter")
    esc = next(ev["seq"] for ev in events if ev["kind"] == "escalation")
    fin = next(ev["seq"] for ev in events if ev["kind"] == "finish" and ev.get("accepted"))
    assert drawing.loc[esc][1] > drawing.loc[fin][1]          # above the worker's bar, not under the ◆


def test_an_end_state_the_service_contradicts_is_marked():
    _, _, fig = figure("combined-cancellation-under-pressure", "crashlab.gallery.cancellation:CancellationTheater")
    shown = texts(fig)
    assert "≠ R-1 held" in shown                              # CANCELLED_NO_EFFECT while R-1 is held
    assert any("an end state the service contradicts" in t for t in shown)
    _, _, ok = figure("t2-commit-before-record", "crashlab.reference_impl:ReferenceAdapter")
    assert not any(t.startswith("≠") for t in texts(ok))


@pytest.mark.parametrize("scenario, adapter", [
    ("fieldops-no-key-lookup", "crashlab.gallery.retries:BlindRetry"),
    ("combined-cancellation-under-pressure", "crashlab.gallery.cancellation:CancellationTheater"),
    ("matrix-stale-checkpoint", "crashlab.gallery.ownership:UnfencedZombie"),
    ("t6-duplicate-input-event", "crashlab.gallery.recovery:DuplicateEventTwice"),
])
def test_a_failing_adapters_figure_has_no_overprinted_or_cut_text(scenario, adapter):
    _, drawing, fig = figure(scenario, adapter)
    assert text_problems(fig) == []
    notes = drawing.note_lines()
    assert notes and not any(re.search(r"\w…\w", line) for line in notes)

"""A report says where its verdict comes from: the scenarios that raised an automatic
failure (score section, summary.md, the CLI scorecard), a finding's example that raised it,
and no progress line that counts failures it never judged."""
from __future__ import annotations

import io

from crashlab.checks.rubric import score
from crashlab.report.findings import auto_fail_sources, group
from crashlab.report.index import finding_html, score_html
from crashlab.report.markdown import summary
from crashlab.report.view import Item
from crashlab.vocab.results import ScenarioResult, Violation

NOT_AUTO = ("RETRY-01: repeats #73; the service deduplicates this key, so the resend cannot duplicate: it costs "
            "the classification point, not an automatic failure")
AUTO = "RETRY-01: repeats #73; the resend could duplicate (reservation declares no idempotency)"


def result(id_: str, *violations: Violation) -> ScenarioResult:
    return ScenarioResult(id=id_, title=id_, verdict="fail" if violations else "pass",
                          dispositions={"run-82": "SUCCEEDED"}, violations=tuple(violations), seed=1,
                          repro=f"crashlab run {id_} --adapter a:B --seed 1")


def retry(auto: bool) -> Violation:
    return Violation(invariant="RETRY-01", message=AUTO if auto else NOT_AUTO, events=(73, 130), run="run-82",
                     category="classification", auto_fail="blind ambiguous retry" if auto else None, point="C3")


def library():
    """Ten scenarios: RETRY-01 costs a point in the first four, raises the automatic failure in
    six others (the BlindRetry shape)."""
    return ([result(f"crash-{i}", retry(False)) for i in range(4)]
            + [result(f"matrix-{i}", retry(True)) for i in range(6)] + [result("t3-ok")])


def test_the_score_names_the_scenarios_that_raised_the_automatic_failure():
    results = library()
    card = score(results, adapter="a:B", seed=None)
    assert card.total == 0 and card.auto_fail
    [src] = auto_fail_sources(card.scenarios)
    assert src.invariant == "RETRY-01" and src.scenarios == tuple(f"matrix-{i}" for i in range(6))
    html = score_html(card, {r.id: f"scenarios/{r.id}.html" for r in results})
    assert "RETRY-01</code> in 6 scenarios" in html and 'href="scenarios/matrix-5.html"' in html
    assert "crash-0" not in html.split("AUTOMATIC FAILURE", 1)[1].split("</ul>", 1)[0]
    md = summary([Item(result=r, events=None, name=r.id) for r in results], card, "a:B")
    assert "automatic failure from blind ambiguous retry: RETRY-01 in 6 scenarios: matrix-0" in md
    assert "raised in 6 of the 10" in md


def test_the_cli_scorecard_names_them_too():
    from crashlab.report.scorecard import format_scorecard

    text = format_scorecard(score(library(), adapter="a:B", seed=None))
    assert "automatic failure from blind ambiguous retry: RETRY-01 in 6 scenarios: matrix-0, matrix-1" in text


def test_an_automatic_failure_finding_is_exemplified_by_a_violation_that_raised_it():
    items = [Item(result=r, events=None, name=r.id) for r in library()]
    [finding] = [f for f in group(items) if f.rule == "RETRY-01"]
    assert finding.first.result.id == "matrix-0" and finding.example.auto_fail
    html = finding_html(finding, {}, no_answers=False)
    assert "not an automatic failure" not in html
    assert "raised the automatic failure in 6 of these scenarios" in html


def test_the_figure_progress_never_counts_failures():
    from crashlab.report.commands import figure_progress

    out = io.StringIO()
    progress = figure_progress(stream=out)
    progress.total = 3
    progress.update()
    line = progress.status()
    assert line.startswith("crashlab: figures: 1/3") and "failing" not in line


def test_check_prints_dispositions_as_words_not_a_python_dict():
    from crashlab.run.conformance import failure_message

    res = ScenarioResult(id="x", title="x", verdict="fail", dispositions={"run-1": "SUCCEEDED", "run-2": None},
                         violations=(retry(True),), seed=1, repro="crashlab run x --adapter a:B --seed 1")
    text = failure_message(res)
    assert "{" not in text and "None" not in text
    assert "(dispositions: run-1 SUCCEEDED, run-2 no terminal disposition)" in text


def test_run_without_answers_prints_no_adapter(tmp_path, capsys):
    from crashlab.cli import main

    main(["run", "t2-commit-before-record", "--adapter", "crashlab.gallery.retries:BlindRetry",
          "--out", str(tmp_path), "--no-answers"])
    out = capsys.readouterr().out
    assert "BlindRetry" not in out and '--adapter "$CRASHLAB_ADAPTER" --seed 102' in out


def test_the_eight_traces_are_all_workshop_scenarios():
    from crashlab.scenario.loader import library

    traces = [s for s in library() if any(s.id.startswith(f"t{n}-") for n in range(1, 9))]
    assert len(traces) == 8 and all("workshop" in s.tags for s in traces), \
        [s.id for s in traces if "workshop" not in s.tags]


def test_report_failures_draws_figures_for_failing_scenarios_only(tmp_path):
    from pathlib import Path

    from crashlab.cli import main

    root = Path(__file__).resolve().parent.parent
    failing = sorted((root / "reports" / "exhibit-blind-retry" / "traces").glob("*.jsonl"))
    passing = root / "traces" / "t3-record-before-response.jsonl"
    out = tmp_path / "r"
    main(["report", *map(str, failing), str(passing), "--out", str(out), "--report-failures", "-q", "--jobs", "1"])
    drawn = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert drawn == sorted(p.name.split(".seed")[0].removesuffix(".jsonl") for p in failing)
    page = (out / "scenarios" / "t3-record-before-response.html").read_text(encoding="utf-8")
    assert "The figure was not drawn" in page and "<img" not in page
    assert "<img" in (out / "scenarios" / f"{drawn[0]}.html").read_text(encoding="utf-8")


def test_every_cited_event_has_an_anchor_in_the_event_table_port_calls_included(tmp_path):
    import re
    from pathlib import Path

    from crashlab.report import render_inputs

    root = Path(__file__).resolve().parent.parent
    index = render_inputs(sorted((root / "reports" / "exhibit-blind-retry" / "traces").glob("*.jsonl")),
                          tmp_path / "r", jobs=1, figures="failures")
    for page in (index.parent / "scenarios").glob("*.html"):
        html = page.read_text(encoding="utf-8")
        cited = set(re.findall(r'href="#e-(\d+)"', html))
        anchors = set(re.findall(r"id=['\"]e-(\d+)['\"]", html))
        assert cited and cited <= anchors, (page.name, sorted(cited - anchors, key=int))
        assert re.search(r"reservation\.reserve\(.*?\) → ", html)           # port calls, with their results
        assert re.search(r"crashlab show \S+\.jsonl --around \d+", html)


def test_category_names_wrap_between_words_in_the_score_table():
    results = library()
    card = score(results, adapter="a:B", seed=None)
    points = score_html(card, {}).split("</table>")[0]          # the points per category
    assert "<td>effect correctness</td>" in points and "effect_correctness" not in points

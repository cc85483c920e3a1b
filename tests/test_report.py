"""The report: figures, the self-contained HTML page, the Markdown summary, re-rendering from
saved files, escaping of hostile strings and bad inputs."""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from crashlab.checks import check_trace
from crashlab.vocab.errors import UsageError
from crashlab.report import render_inputs, render_results, render_scorecard
from crashlab.report.figure import TimeAxis
from crashlab.report.machines import layout, svg
from crashlab.vocab.results import LostPoint, Scorecard
from crashlab.run.runner import run_scenario
from crashlab.scenario import load_file
from crashlab.world.trace import write_jsonl

DATA = Path(__file__).parent / "data" / "report"
sys.path.insert(0, str(DATA))

#: scenario file -> adapter class in report_adapters.py
SCENARIOS = {"commit_crash": "Careful", "pressure": "Careful", "blind_retry": "Sloppy",
             "cancel_after_commit": "Careful", "hostile": "Hostile"}
HOSTILE_MARKUP = ("<script", "<img src=x", "<iframe", "<svg onload", "<b>k</b>", "<b>tag", "<T>")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Every report scenario run once; traces saved; results checked."""
    root = tmp_path_factory.mktemp("saved")
    traces = root / "traces"
    results = []
    for name, cls in SCENARIOS.items():
        run = run_scenario(load_file(DATA / f"{name}.yaml"), f"report_adapters:{cls}")
        path = traces / f"{run.scenario.id}.seed{run.seed}.jsonl"
        write_jsonl(run.events, path)
        results.append(replace(check_trace(run.events, trace_path=str(path)), seed=run.seed, repro=run.repro))
    return root, traces, results


def card_of(results) -> Scorecard:
    lost = tuple(LostPoint(category=v.category or "effect_correctness", point="p", scenario=r.id,
                           invariant=v.invariant, events=v.events, message=v.message)
                 for r in results for v in r.violations[:1])
    return Scorecard(adapter="report_adapters:Careful", seed=None, total=20 - len(lost), max=20,
                     categories={"classification": {"score": 5, "max": 5}, "ownership": {"score": 4, "max": 4},
                                 "effect_correctness": {"score": 6 - len(lost), "max": 6},
                                 "disposition": {"score": 5, "max": 5}},
                     lost=lost, scenarios=tuple(results), verdict="fail")


@pytest.fixture(scope="module")
def rendered(saved, tmp_path_factory):
    _, _, results = saved
    out = tmp_path_factory.mktemp("report")
    return render_scorecard(card_of(results), out), results


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def page(index: Path, scenario: str) -> str:
    """The scenario's own page."""
    return (index.parent / "scenarios" / f"{scenario}.html").read_text(encoding="utf-8")


def pages(index: Path) -> list[Path]:
    return [index] + sorted((index.parent / "scenarios").glob("*.html"))


def tags_of(text: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(text)
    return parser.tags


# --------------------------------------------------------------------------- figures
def test_every_scenario_gets_a_png_figure_and_a_page(rendered, tmp_path):
    index, results = rendered
    figures = index.parent / "figures"
    assert sorted(p.name for p in figures.iterdir()) == sorted([f"{r.id}.png" for r in results] + ["digests.json"])
    assert sorted(p.name for p in (index.parent / "scenarios").iterdir()) == sorted(f"{r.id}.html" for r in results)
    for r in results:
        png = (figures / f"{r.id}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    # an SVG is drawn on request (from Python)
    from crashlab.report.figure import render_figure
    from crashlab.world.trace import read_jsonl

    events = read_jsonl(results[0].trace)
    assert render_figure(events, results[0], tmp_path / "x", svg=True) == tmp_path / "x.png"
    root = ET.fromstring((tmp_path / "x.svg").read_bytes())
    assert root.tag.endswith("svg") and len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 20
    assert not root.findall(".//{http://www.w3.org/2000/svg}image")      # the legend's swatches too are vectors


def _same_report(one: Path, two: Path, results) -> None:
    for rel in ["index.html", "summary.md"] + [f"{d}/{r.id}.{x}" for r in results
                                                for d, x in (("figures", "png"), ("scenarios", "html"))]:
        assert (one.parent / rel).read_bytes() == (two.parent / rel).read_bytes(), rel


def test_rendering_is_deterministic_in_one_process_or_several(saved, tmp_path, monkeypatch):
    import crashlab.report

    _, _, results = saved
    one = render_results(results[:2], tmp_path / "one")
    monkeypatch.setattr(crashlab.report, "PARALLEL_MIN", 1)   # forked workers where the host allows
    two = render_results(results[:2], tmp_path / "two")
    _same_report(one, two, results[:2])
    three = render_results(results, tmp_path / "three", jobs=3)
    four = render_results(results, tmp_path / "four", jobs=1)
    _same_report(three, four, results)


def test_scenario_workers_follow_jobs_and_fall_back_to_this_process(monkeypatch, tmp_path):
    import multiprocessing as mp

    import crashlab.report as report

    tasks = [tmp_path / f"{i}.txt" for i in range(20)]
    forks = "fork" in mp.get_all_start_methods()
    assert report._workers(tasks, 1) == 1
    assert report._workers(tasks, 3) == (3 if forks else 1)
    assert report._workers(tasks, 64) == (20 if forks else 1)
    assert report._workers(tasks[:report.PARALLEL_MIN - 1], 4) == 1      # a few figures: not worth a fork
    monkeypatch.setattr(report, "_scenario", lambda task: task.write_text(task.stem))
    report._scenarios(tasks, jobs=1)
    assert [t.read_text() for t in tasks] == [str(i) for i in range(20)]


@pytest.mark.skipif(sys.platform != "linux", reason="forked workers")
def test_scenarios_a_dead_worker_did_not_draw_are_drawn_in_this_process(monkeypatch, tmp_path):
    import os

    import crashlab.report as report

    parent = os.getpid()

    def scenario(task):
        if task.stem == "5" and os.getpid() != parent:
            os._exit(1)          # a worker killed mid-figure (out of memory, say)
        task.write_text(f"{task.stem} by {'this process' if os.getpid() == parent else 'a worker'}")

    monkeypatch.setattr(report, "_scenario", scenario)
    tasks = [tmp_path / f"{i}.txt" for i in range(12)]
    report._scenarios(tasks, jobs=2)
    assert all(t.read_text().startswith(t.stem) for t in tasks)
    assert (tmp_path / "5.txt").read_text() == "5 by this process"
    assert any(t.read_text().endswith("a worker") for t in tasks)


def test_a_command_with_jobs_draws_the_figures_with_as_many():
    import argparse

    from crashlab.report.commands import report_options

    assert report_options(argparse.Namespace(jobs=3, quiet=True))["jobs"] == 3
    assert report_options(argparse.Namespace(quiet=True))["jobs"] is None       # the cores


def test_crashlab_report_writes_the_same_files_with_any_jobs(saved, tmp_path, monkeypatch):
    import crashlab.report as report
    from crashlab.cli import main

    _, traces, _ = saved
    monkeypatch.setattr(report, "PARALLEL_MIN", 1)   # forked workers where the host allows
    asked = []
    workers = report._workers
    monkeypatch.setattr(report, "_workers", lambda tasks, jobs: asked.append(jobs) or workers(tasks, jobs))
    outs = {jobs: tmp_path / f"jobs{jobs}" for jobs in (1, 2)}
    for jobs, out in outs.items():
        assert main(["report", str(traces), "--out", str(out), "--jobs", str(jobs), "-q"]) == 0
    assert asked == [1, 2]
    files = {jobs: sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) for jobs, out in outs.items()}
    assert files[1] == files[2] and any(p.suffix == ".png" for p in files[1])
    for rel in files[1]:
        assert (outs[1] / rel).read_bytes() == (outs[2] / rel).read_bytes(), rel


def test_time_axis_is_monotonic_and_bounded():
    times = [0, 1, 2, 3, 40, 3_000, 3_001, 60_000, 600_000]
    axis = TimeAxis(times, 0, 600_000)
    xs = [axis.x(t) for t in range(0, 600_001, 997)] + [axis.x(t) for t in times]
    assert min(xs) == 0.0 and max(xs) == pytest.approx(100.0)
    grid = sorted(set(range(0, 600_001, 997)) | set(times))
    positions = [axis.x(t) for t in grid]
    assert all(a < b for a, b in zip(positions, positions[1:]))
    # a burst of millisecond events is widened: 4 ms take more room than 1 % of the span would
    assert axis.x(3) - axis.x(0) > 5


# --------------------------------------------------------------------------- HTML
def test_html_is_self_contained(rendered):
    index, results = rendered
    images = []
    for path in pages(index):
        text = path.read_text(encoding="utf-8")
        tags = tags_of(text)
        for tag, attrs in tags:
            for name in ("src", "href", "xlink:href", "action"):
                value = attrs.get(name) or ""
                assert not re.match(r"\s*([a-z]+:)?//", value), (path, tag, name, value)
                assert not value.startswith(("javascript:", "/")), (path, tag, name, value)
            assert tag not in ("script", "link", "iframe", "object", "embed")
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", text)
        images += [a for t, a in tags if t == "img"]
        assert "Content-Security-Policy" in text and "script-src" not in text
    assert len(images) == len(results) and all(a["src"].startswith("data:image/png;base64,") for a in images)
    # every relative link of every page leads to a file that exists
    for path in pages(index):
        for tag, attrs in tags_of(path.read_text(encoding="utf-8")):
            href = attrs.get("href")
            if tag == "a" and href and not href.startswith("#"):
                assert (path.parent / href.split("#")[0]).resolve().is_file(), (path, href)


def test_html_shows_score_lost_points_evidence_cards_packets_and_machines(rendered):
    index, results = rendered
    text = index.read_text(encoding="utf-8")
    assert "Where points were lost" in text
    for r in results:
        assert f'href="scenarios/{r.id}.html"' in text
    blind = next(r for r in results if r.id == "report-blind-retry")
    eff = next(v for v in blind.violations if v.invariant == "EFF-01")
    # the cited events are shown with their one-line summaries, on the scenario's page
    for seq in eff.events:
        assert re.search(rf"#{seq} 09:00:\S* run-7 reservation committed R-\d", page(index, blind.id))
    pressure = page(index, "report-pressure")
    assert "Authoritative query" in pressure and "reservation.lookup(key), unavailable until 10:20" in pressure
    # the unresolved pressure run escalated: its packet's panels are shown, recommendation first
    for panel in ("Recommended", "Alternatives", "Header", "Effects (1)", "authority", "compatibility", "budget"):
        assert f">{panel}</h4>" in pressure, panel
    assert pressure.index(">Recommended</h4>") < pressure.index(">Alternatives</h4>") < pressure.index(">Header</h4>")
    assert "missing from the packet" not in pressure and "CANCELLED_EFFECT_UNKNOWN" in pressure
    assert "<dt>deadline</dt><dd>10:15</dd>" in pressure          # a clock time, not 900000
    # state machines with the taken transitions highlighted
    assert pressure.count('<svg class="machine"') == 2
    assert "EFFECT_PREPARED → EFFECT_IN_FLIGHT: step" in pressure


def test_hostile_strings_are_escaped(rendered):
    index, _ = rendered
    hostile = page(index, "report-hostile")
    for markup in HOSTILE_MARKUP:
        assert markup not in hostile
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; friends" in hostile      # scenario title
    assert "&lt;script&gt;alert(&#x27;pwn&#x27;)&lt;/script&gt;" in hostile      # packet goal and query
    assert "&lt;iframe src=&#x27;javascript:alert(3)&#x27;&gt;" in hostile        # recommended action
    assert "&lt;svg onload=alert(4)&gt;" in hostile                               # a packet key
    assert "&lt;img src=x onerror=alert(&#x27;card&#x27;)&gt;" in hostile        # teaching card
    assert "$\\alpha$ &lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;" in hostile
    assert "&lt;/table&gt;&lt;script&gt;alert(5)&lt;/script&gt;" in hostile       # packet next_owner
    for path in pages(index):
        for tag, attrs in tags_of(path.read_text(encoding="utf-8")):
            assert not any(name.startswith("on") for name in attrs), (tag, attrs)
    summary = (index.parent / "summary.md").read_text(encoding="utf-8")
    assert "<script" not in summary
    # a failing hostile scenario shows its title in the summary, escaped
    from crashlab.report.markdown import summary as markdown_summary
    from crashlab.report.view import Item

    hostile_result = next(r for r in rendered[1] if r.id == "report-hostile")
    text = markdown_summary([Item(result=replace(hostile_result, verdict="fail"), events=None, name="x")],
                            None, None)
    assert "<script" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_output_names_cannot_escape_the_output_folder(saved, tmp_path):
    _, traces, results = saved
    evil_id = "../../escaped/x"
    events = [json.loads(line) for line in next(traces.glob("report-commit-crash*")).read_text().splitlines()]
    events[0]["scenario"] = evil_id
    path = tmp_path / "evil.jsonl"
    write_jsonl(events, path)
    result = replace(results[0], id=evil_id, trace=str(path))
    out = tmp_path / "deep" / "out"
    index = render_results([result], out)
    assert index == out / "index.html"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != path]
    assert written and all(out in p.parents for p in written)
    assert (out / "figures" / "escaped_x.png").is_file()


# --------------------------------------------------------------------------- Markdown
def summary_sections(summary: str) -> dict[str, str]:
    parts = re.split(r"^### ", summary, flags=re.M)
    return {p.split("\n", 1)[0].split(" (")[0]: p for p in parts[1:]}


def test_markdown_summary_puts_failures_first_with_repro_lines(rendered):
    index, results = rendered
    summary = (index.parent / "summary.md").read_text(encoding="utf-8")
    assert re.search(r"\*\*Score \d+/20\*\*", summary)
    parts = summary_sections(summary)
    assert list(parts) == ["Points lost", "Findings", "Failures", "Passed"]
    failed = [r for r in results if r.verdict != "pass"]
    passed = [r for r in results if r.verdict == "pass"]
    assert failed and passed
    for r in failed:
        assert f"{r.id}**" in parts["Failures"]
        block = parts["Failures"].split(f"{r.id}**", 1)[1].split("```sh\n", 1)[1].split("\n", 1)[0]
        assert re.fullmatch(r"crashlab run \S+\.yaml --adapter report_adapters:\w+ --seed \d+", block), block
        for inv in {v.invariant for v in r.violations}:
            assert re.search(rf"^- {inv}( ×\d+)?: ", parts["Failures"], re.M)
    for r in passed:
        assert r.id in parts["Passed"] and r.id not in parts["Failures"]
    assert len(summary.encode()) < 64_000          # fits a CI job summary


# --------------------------------------------------------------------------- re-rendering
def _results_json(card: Scorecard, path: Path) -> Path:
    data = card.to_json()
    for s in data["scenarios"]:          # relative paths, as `crashlab conformance --json` writes them
        s["trace"] = f"crashlab-out/{Path(s['trace']).name}"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_rerender_from_results_json_and_traces(saved, rendered, tmp_path, monkeypatch):
    from crashlab.checks.rubric import score

    root, traces, results = saved
    # a made-up scorecard (one adapter's name over three adapters' traces, a score it never earned)
    # is refused: the report re-checks every trace it names against what the file says
    made_up = _results_json(card_of(results), tmp_path / "made-up.json")
    with pytest.raises(UsageError, match="the trace, checked again, shows adapter report_adapters:Sloppy"):
        render_inputs([made_up, traces], tmp_path / "refused")
    assert not (tmp_path / "refused" / "index.html").exists()
    careful = [r for r in results if '"adapter":"report_adapters:Careful"' in Path(r.trace).read_text()]
    card = score(careful, adapter="report_adapters:Careful", seed=None)
    results_json = _results_json(card, tmp_path / "results.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(UsageError, match="pass the folder of traces too"):
        render_inputs([results_json], tmp_path / "a")
    index = render_inputs([results_json, traces], tmp_path / "b")
    original, _ = rendered
    for r in careful:  # the same figures as the direct rendering, byte for byte
        for rel in (f"figures/{r.id}.png",):
            assert (index.parent / rel).read_bytes() == (original.parent / rel).read_bytes()
    assert f"Score {card.total}/{card.max}" in index.read_text(encoding="utf-8")
    # the traces also resolve relative to the JSON's own folder
    (tmp_path / "crashlab-out").mkdir()
    for p in traces.iterdir():
        (tmp_path / "crashlab-out" / p.name).write_bytes(p.read_bytes())
    assert render_inputs([results_json], tmp_path / "c").is_file()


def test_rerender_from_traces_only_checks_them_again(saved, tmp_path):
    _, traces, results = saved
    index = render_inputs([traces], tmp_path / "out")
    summary = (index.parent / "summary.md").read_text(encoding="utf-8")
    parts = summary_sections(summary)
    for r in results:
        assert r.id in parts["Failures" if r.verdict != "pass" else "Passed"]
        for inv in {v.invariant for v in r.violations}:
            assert re.search(rf"^- {inv}( ×\d+)?: ", parts["Failures"], re.M)
    assert "Traces checked again from saved files." in index.read_text(encoding="utf-8")
    assert "**Score" not in summary          # three adapters: no common score


def test_traces_of_one_adapter_are_scored_with_the_rubric(saved, tmp_path):
    _, traces, _ = saved
    careful = [p for p in traces.iterdir() if '"adapter":"report_adapters:Careful"' in p.read_text()]
    assert len(careful) == 3
    index = render_inputs(careful, tmp_path / "out")
    summary = (index.parent / "summary.md").read_text(encoding="utf-8")
    # under an automatic failure the score line also names it and the points kept otherwise (docs/rubric.md)
    assert re.search(r"\*\*Score \d+/20( \([^*]*\))?\*\*", summary)
    assert "Where points were lost" in index.read_text(encoding="utf-8") or "No point was lost" in \
        index.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- bad inputs
def test_bad_inputs_raise_usage_errors_naming_the_file(saved, tmp_path):
    out = tmp_path / "out"
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(UsageError, match="nope.jsonl: no such file"):
        render_inputs([missing], out)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="no .jsonl trace in this folder"):
        render_inputs([empty], out)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(UsageError, match="notes.txt:1: not a JSON object"):
        render_inputs([text], out)
    not_trace = tmp_path / "x.jsonl"
    not_trace.write_text('{"a": 1}\n')
    with pytest.raises(UsageError, match="x.jsonl:1: not a crashlab trace event"):
        render_inputs([not_trace], out)
    broken = tmp_path / "results.json"
    broken.write_text('{"score": ')
    with pytest.raises(UsageError, match="results.json:1: not valid JSON"):
        render_inputs([broken], out)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"score": {"total": 1, "max": 20}, "scenarios": [{"id": "x", "verdict": "maybe"}]}')
    with pytest.raises(UsageError, match=r"wrong.json: not a crashlab results JSON: scenarios\[0\].verdict"):
        render_inputs([wrong], out)
    _, _, results = saved
    gone = replace(results[0], trace=str(tmp_path / "gone.jsonl"))
    with pytest.raises(UsageError, match="trace of scenario report-commit-crash"):
        render_results([gone], out)
    assert not (out / "index.html").exists()


def test_missing_matplotlib_names_the_extra(saved, tmp_path, monkeypatch):
    _, _, results = saved
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UsageError, match=r"pip install 'crashlab\[report\]'"):
        render_results(results[:1], tmp_path)


# --------------------------------------------------------------------------- state machines
def test_state_machine_layout_covers_every_state_and_flags_illegal_steps():
    from crashlab.vocab.model import RunState

    assert set(layout("run").boxes) == {s.value for s in RunState}
    drawing = svg("run", [(None, "VALIDATED"), ("VALIDATED", "PROPOSED"), ("PROPOSED", "SUCCEEDED")], "t")
    assert "INTAKE → VALIDATED: step 1" in drawing
    assert "VALIDATED → PROPOSED: step 2" in drawing
    assert "PROPOSED → SUCCEEDED: step 3 (not in the transition table)" in drawing
    ET.fromstring(drawing)

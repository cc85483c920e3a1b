"""A report written again into the same folder keeps the figures whose inputs did not change."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import crashlab.report as report  # noqa: E402
from crashlab.report import render_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRACES = ["combined-cancel-after-finish.jsonl", "t2-commit-before-record.jsonl"]


@pytest.fixture
def traces(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    for name in TRACES:
        shutil.copy(ROOT / "traces" / name, folder / name)
    return folder


@pytest.fixture
def drawn(monkeypatch):
    """The names of the figures drawn (not kept) by each render."""
    names: list[str] = []
    original = report._figure

    def counted(job):
        names.append(Path(job[3]).name)
        return original(job)

    monkeypatch.setattr(report, "_figure", counted)
    return names


def pages(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.suffix in (".html", ".png", ".md")}


def test_a_report_written_again_draws_nothing_and_writes_the_same_bytes(traces, tmp_path, drawn):
    out = tmp_path / "out"
    render_inputs([traces], out, jobs=1)
    first = pages(out)
    assert len(drawn) == 2
    drawn.clear()
    render_inputs([traces], out, jobs=1)
    assert drawn == []
    assert pages(out) == first


def test_a_changed_input_or_view_is_drawn_again(traces, tmp_path, drawn):
    out = tmp_path / "out"
    render_inputs([traces], out, jobs=1)
    drawn.clear()
    render_inputs([traces], out, jobs=1, linear=True)          # another view: every figure
    assert sorted(drawn) == ["combined-cancel-after-finish", "t2-commit-before-record"]
    drawn.clear()
    lines = (traces / TRACES[1]).read_text().splitlines()
    head = json.loads(lines[0])
    head["title"] += " (edited)"
    (traces / TRACES[1]).write_text("\n".join([json.dumps(head)] + lines[1:]) + "\n")
    render_inputs([traces], out, jobs=1, linear=True)          # one trace changed: its figure only
    assert drawn == ["t2-commit-before-record"]


def test_a_missing_figure_or_a_damaged_manifest_is_drawn_again(traces, tmp_path, drawn):
    out = tmp_path / "out"
    render_inputs([traces], out, jobs=1)
    drawn.clear()
    (out / "figures" / "t2-commit-before-record.png").unlink()
    render_inputs([traces], out, jobs=1)
    assert drawn == ["t2-commit-before-record"]
    drawn.clear()
    (out / "figures" / "digests.json").write_text("[not a manifest")
    render_inputs([traces], out, jobs=1)
    assert sorted(drawn) == ["combined-cancel-after-finish", "t2-commit-before-record"]


def test_a_figure_being_redrawn_is_not_claimed_by_its_old_digest(traces, tmp_path, monkeypatch):
    """Interrupted while drawing: the next report cannot keep a figure drawn from other inputs."""
    out = tmp_path / "out"
    render_inputs([traces], out, jobs=1)
    before = json.loads((out / "figures" / "digests.json").read_text())
    assert set(before) == {"combined-cancel-after-finish", "t2-commit-before-record"}

    def interrupted(job):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "_figure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        render_inputs([traces], out, jobs=1, linear=True)
    assert json.loads((out / "figures" / "digests.json").read_text()) == {}


# ------------------------------------------------------------------ once per report
def test_a_repeated_picture_is_drawn_once_and_every_scenario_still_gets_it(traces, tmp_path, drawn):
    """Two scenarios whose figures are the same picture (the same trace saved twice): one draw,
    the same bytes under both names, each page embedding them; any number of workers."""
    again = tmp_path / "again"
    again.mkdir()
    shutil.copy(traces / TRACES[1], again / TRACES[1])
    out = tmp_path / "out"
    render_inputs([traces, again], out, jobs=1)
    assert sorted(drawn) == ["combined-cancel-after-finish", "t2-commit-before-record"]
    figures = out / "figures"
    png = (figures / "t2-commit-before-record.png").read_bytes()
    assert (figures / "t2-commit-before-record-2.png").read_bytes() == png
    assert set(json.loads((figures / "digests.json").read_text())) == {
        "combined-cancel-after-finish", "t2-commit-before-record", "t2-commit-before-record-2"}
    import base64

    for name in ("t2-commit-before-record", "t2-commit-before-record-2"):
        assert base64.b64encode(png).decode() in (out / "scenarios" / f"{name}.html").read_text()
    drawn.clear()                  # written again: both kept, nothing drawn, the same bytes
    first = pages(out)
    render_inputs([traces, again], out, jobs=1)
    assert drawn == [] and pages(out) == first


def test_a_repeated_picture_drawn_by_workers_gives_the_same_report(traces, tmp_path, monkeypatch):
    again = tmp_path / "again"
    again.mkdir()
    shutil.copy(traces / TRACES[1], again / TRACES[1])
    render_inputs([traces, again], tmp_path / "one", jobs=1)
    monkeypatch.setattr(report, "PARALLEL_MIN", 1)
    render_inputs([traces, again], tmp_path / "two", jobs=2)
    assert pages(tmp_path / "two") == pages(tmp_path / "one")


@pytest.fixture
def opened(monkeypatch):
    """How many times each trace file (by its resolved path) is opened."""
    import builtins
    import collections
    import io

    counts: collections.Counter = collections.Counter()
    original = builtins.open

    def counting(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and str(file).endswith(".jsonl"):
            counts[Path(file).resolve()] += 1
        return original(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)
    return counts


def test_no_trace_file_is_read_twice_in_one_report(traces, tmp_path, opened):
    """A trace named twice (a folder and the file in it, spelled another way) is parsed once and
    shared by its pages and figures; so is a trace that two results cite."""
    named_again = traces / ".." / traces.name / TRACES[1]
    render_inputs([traces, named_again], tmp_path / "out", jobs=1)
    assert set(opened) == {(traces / name).resolve() for name in TRACES}
    assert max(opened.values()) == 1, opened
    assert (tmp_path / "out" / "scenarios" / "t2-commit-before-record-2.html").exists()
    opened.clear()
    from crashlab.run.conformance import recheck_saved
    from crashlab.world.trace import read_jsonl

    path = traces / TRACES[1]
    result = recheck_saved(read_jsonl(path), path)
    opened.clear()
    report.render_results([result, result], tmp_path / "results", jobs=1)
    assert dict(opened) == {path.resolve(): 1}


def test_what_a_trace_exercised_is_worked_out_once_for_its_page_and_the_index(traces, tmp_path, monkeypatch):
    import crashlab.checks.exercised as exercised
    from crashlab.run.conformance import recheck_saved
    from crashlab.world.trace import read_jsonl

    results = [recheck_saved(read_jsonl(p), p) for p in sorted(traces.glob("*.jsonl"))]
    walked: list[int] = []
    original = exercised.counts

    def counted(events):
        walked.append(len(events))
        return original(events)

    monkeypatch.setattr(exercised, "counts", counted)
    out = report.render_results(results, tmp_path / "out", jobs=1)
    assert len(walked) == len(results)
    assert "exercised" in out.read_text() and "Exercised" in (out.parent / "scenarios" / f"{TRACES[1][:-6]}.html").read_text()

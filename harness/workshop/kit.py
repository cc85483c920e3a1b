"""A rung's kit: the task in the chapter's words, the scenario, the evidence, the blank
worksheet (and its JSON Schema), the starting adapter, and a printable handout.

Nothing here reads data/answers.yaml, crashlab.workshop.solutions or a teaching card: a
kit never contains its answer (tests/test_workshop.py checks it).
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import yaml

from ..scenario.yaml import parse_yaml
from ..world.trace import write_jsonl
from . import evidence as E
from . import exhibits, grade, keys
from .ladder import TRACE_LABELS, Rung, vocabularies

STARTERS = E.DATA / "starters"
HIDDEN_SCENARIO_FIELDS = ("card", "description", "expect")


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def scenario_text(name: str) -> str:
    """The scenario as the learner may read it: no teaching card, no description, no
    expectations (those are the answers)."""
    source = Path(E.scenario_of(name).source)
    doc = _plain(parse_yaml(source.read_text(encoding="utf-8"), file=str(source)))
    for key in HIDDEN_SCENARIO_FIELDS:
        doc.pop(key, None)
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def evidence_sets(rung: Rung) -> list[tuple[str, list[dict]]]:
    """(label, sanitized events) for every trace the rung is read from."""
    if rung.kind == "exhibits":
        return [(label, exhibits.kit_trace(label)) for label in exhibits.EXHIBITS]
    if rung.kind == "rubric":
        from . import rubric
        return [(f"R-{name.split('-')[0]}" if name.startswith("t") else f"R-{name}", events)
                for name, events in rubric.traces()] + rubric.failure_traces()
    return [(TRACE_LABELS[i], E.sanitize(E.trace(name, keys.REFERENCE))) for i, name in enumerate(rung.scenarios)]


def table_rows(rung: Rung) -> list[tuple[str, int, str]]:
    if rung.kind != "table":
        return []
    return keys.anchors(rung, E.trace(rung.scenario, keys.REFERENCE))


def task_markdown(rung: Rung, files: list[str]) -> str:
    lines = [f"# Rung {rung.id}: {rung.title}", "", "## The chapter", "", f"> {rung.chapter}", "",
             "## Your task", "", rung.question, ""]
    if rung.code_task:
        wire = ("`wire_adapter.py` is the same exercise as a standalone program speaking the wire protocol "
                "(standard-library Python, easy to port to any language; docs/protocol.md); fix its "
                "`resolve_unknown` and check it with" if rung.wire_starter else
                "Run your `adapter.py` as a subprocess over the wire protocol (docs/protocol.md) with")
        lines += ["### Code", "", rung.code_task, "", wire, "",
                  f"    crashlab workshop check {rung.id} --wire", "",
                  "or grade your own adapter in any language on this rung's scenario:", "",
                  f"    crashlab workshop check {rung.id} --adapter \"exec:node my-adapter.js\"", ""]
    if rung.questions:
        lines += ["### Worksheet", "",
                  "Fill `worksheet.yaml` (your editor completes it from `worksheet.schema.json`). Cite events "
                  "by their sequence number (`#`) in the listing; take every other value from `vocab.md`.", ""]
        lines += [f"- `{q.id}`: {q.prompt}" for q in rung.questions if q.type != "table"]
        lines.append("")
    if rung.columns:
        lines += ["### Table", "", "One row per anchored event (the worksheet names each row's event); the "
                  "columns, each from its vocabulary in `vocab.md`:", ""]
        lines += [f"- `{column}` (vocabulary `{name}`)" for column, name in rung.columns.items()]
        lines.append("")
    lines += ["## Check, hint, reveal", "", f"    crashlab workshop check {rung.id}          # grade",
              f"    crashlab workshop check {rung.id} --hint   # one more hint",
              f"    crashlab workshop reveal {rung.id}         # the model answer (after an attempt)", "",
              "## Files", ""] + [f"- `{f}`" for f in files]
    return "\n".join(lines) + "\n"


def vocab_markdown(rung: Rung) -> str:
    lines = ["# Vocabularies", "", "Every answer that is not an event number comes from one of these lists.", ""]
    for name, values in vocabularies().items():
        lines.append(f"- **{name}**: " + ", ".join(f"`{v}`" for v in values))
    if rung.kind == "exhibits":
        lines += ["", "## Invariants (the rules an exhibit may break)", "", exhibits.rules_markdown()]
    if rung.kind == "rubric":
        lines += ["", "The twenty points and the five automatic failures: `rubric.md`."]
    return "\n".join(lines) + "\n"


def rubric_markdown() -> str:
    from ..checks.docs import rubric_markdown as points
    return "\n".join(line for line in points().splitlines() if not line.startswith("<!--")) + "\n"


def handout_html(rung: Rung, listings: list[tuple[str, str]], worksheet: str, starter: str | None,
                 vocab: str = "") -> str:
    """A printable page: the task, the blank worksheet, and the evidence listings."""
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Rung {e(rung.id)}</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:auto}pre{font-size:9pt;"
             "white-space:pre-wrap;border:1px solid #ccc;padding:.5em}"
             "@media print{pre{page-break-inside:auto}}</style></head><body>",
             f"<h1>Rung {e(rung.id)}: {e(rung.title)}</h1>", f"<blockquote>{e(rung.chapter)}</blockquote>",
             f"<p><b>{e(rung.question)}</b></p>"]
    if rung.code_task:
        parts.append(f"<p>{e(rung.code_task)}</p>")
    if worksheet:
        parts += ["<h2>Worksheet</h2>", f"<pre>{e(worksheet)}</pre>"]
    if vocab:
        parts += ["<h2>Vocabularies</h2>", f"<pre>{e(vocab)}</pre>"]
    for label, text in listings:
        parts += [f"<h2>Evidence {e(label)}</h2>", f"<pre>{e(text)}</pre>"]
    if starter:
        parts += ["<h2>Starting adapter</h2>", f"<pre>{e(starter)}</pre>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def write(rung: Rung, folder: Path, offset=None, variant: str | None = None) -> list[str]:
    """Write the kit into ``folder``; -> the file names written. An existing worksheet or
    adapter is kept (the learner's work is never overwritten). ``offset`` renumbers every event
    (evidence.Numbering) (a per-learner kit; the grader moves the learner's answers back); ``variant`` (the
    learner's name) also gives the evidence and the scenario the learner's own identifiers,
    keys and clock (E.Variant)."""
    own = E.Variant(variant) if variant else None
    folder.mkdir(parents=True, exist_ok=True)
    files: list[str] = []

    def put(name: str, text: str, keep: bool = False) -> None:
        target = folder / name
        if not (keep and target.exists()):
            target.write_text(text, encoding="utf-8")
        files.append(name)

    listings = []
    sets = evidence_sets(rung)
    for label, events in sets:
        events = E.shift(events, offset or E.Numbering())
        if own:
            events = own.events(events)
        suffix = "" if len(sets) == 1 and rung.kind != "exhibits" else f"-{label}"
        prefix = "exhibit" if rung.kind in ("exhibits", "rubric") else "trace"
        write_jsonl(events, folder / f"{prefix}{suffix}.jsonl")
        files.append(f"{prefix}{suffix}.jsonl")
        text = E.listing(events)
        put(f"listing{suffix}.txt", text)
        listings.append((label, text))
    for i, name in enumerate(rung.scenarios):
        suffix = "" if len(rung.scenarios) == 1 else f"-{TRACE_LABELS[i]}"
        put(f"scenario{suffix}.yaml", own.text(scenario_text(name)) if own else scenario_text(name))
    if rung.code_scenario:
        put("code-scenario.yaml", own.text(scenario_text(rung.code_scenario)) if own else
            scenario_text(rung.code_scenario))
    worksheet = ""
    if rung.questions or rung.kind == "table":
        ids = grade.row_ids(rung, offset, variant)
        rows = sorted(((ids.get(row_id, row_id), offset.kit(seq) if offset else seq, label) for row_id, seq, label in table_rows(rung)),
                      key=lambda row: row[1])
        worksheet = grade.blank(rung, rows)
        put(grade.WORKSHEET, worksheet, keep=True)
        put("worksheet.schema.json", json.dumps(grade.schema(rung, rows), indent=2) + "\n")
        put("vocab.md", vocab_markdown(rung))
    if rung.kind == "rubric":
        put("rubric.md", rubric_markdown())
    if rung.kind == "designs":
        from . import weak
        put(weak.OPTIONS, weak.blank_options(), keep=True)
    starter = None
    if rung.starter:
        starter = (STARTERS / f"{rung.starter}.py").read_text(encoding="utf-8")
        put("adapter.py", starter, keep=True)
    if rung.wire_starter:
        put("wire_adapter.py", (STARTERS / f"{rung.wire_starter}.py").read_text(encoding="utf-8"), keep=True)
    put("handout.html", handout_html(rung, listings, worksheet, starter,
                                     vocab_markdown(rung) if worksheet else ""))
    files.append("task.md")
    (folder / "task.md").write_text(task_markdown(rung, files), encoding="utf-8")
    return files

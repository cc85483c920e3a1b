"""Worksheets: the blank form, its JSON Schema, validation with file/line errors, grading.

A worksheet is YAML::

    rung: t2
    answers:
      sent_unknown: 68        # an event sequence number from the listing
      read: lookup_by_key     # a value from the closed vocabulary
    table:                    # table rungs only
      r1: {run_state: APPROVED, remote: none, knowledge: PROPOSED}

A wrong answer is reported by question (and by row and column), never with the right value.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..vocab.errors import UsageError
from ..scenario.yaml import parse_yaml
from . import keys as K
from .evidence import DATA
from .ladder import Rung, vocab, vocabularies

WORKSHEET = "worksheet.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class Grade:
    passed: tuple[str, ...]
    wrong: tuple[str, ...]       # "question: what is wrong"
    blank: tuple[str, ...]
    held: tuple[str, ...] = ()   # fields not graded any more: too many wrong tries (see MAX_TRIES)
    tried: tuple[tuple[str, str], ...] = ()   # (field, the wrong value given) for each wrong field

    @property
    def ok(self) -> bool:
        return not self.wrong and not self.blank and not self.held


#: Distinct wrong answers a field takes before check stops grading it and points at the trace.
MAX_TRIES = 3


def columns(rung: Rung) -> dict[str, tuple]:
    return {c: vocab(v) for c, v in rung.columns.items()}


# --------------------------------------------------------------------------- blank form and schema
def blank(rung: Rung, rows: list[tuple[str, int, str]]) -> str:
    lines = ["# yaml-language-server: $schema=worksheet.schema.json",
             f"# Worksheet for rung {rung.id}: {rung.title}. Replace every ~ with your answer;",
             "# event answers are sequence numbers (#) from the listing, the others come from vocab.md.",
             f"rung: {rung.id}", "answers:"]
    for q in rung.questions:
        if q.type == "table":
            continue
        shape = {"event": "#", "events": "[#, #, ...]", "choice": "one of " + _short(q.vocab),
                 "set": "a list from " + _short(q.vocab), "count": "a number"}[q.type]
        lines.append(f"  # {q.prompt} ({shape})")
        lines.append(f"  {q.id}: ~")
    if rows:
        cols = columns(rung)
        lines.append("# columns: " + "; ".join(f"{c} from {rung.columns[c]}" for c in cols))
        lines.append("table:")
        for row_id, seq, label in rows:
            lines.append(f"  # {label} (event #{seq})")
            lines.append(f"  {row_id}: {{" + ", ".join(f"{c}: ~" for c in cols) + "}")
    return "\n".join(lines) + "\n"


def _short(values: tuple) -> str:
    text = ", ".join(str(v) for v in values)
    return text if len(text) < 70 else "vocab.md"


def schema(rung: Rung, rows: list[tuple[str, int, str]]) -> dict:
    """A JSON Schema for the worksheet, for editor completion."""
    def one(q):
        if q.type == "event":
            return {"type": ["integer", "null"], "minimum": 0, "description": q.prompt}
        if q.type == "events":
            return {"type": ["array", "null"], "items": {"type": "integer", "minimum": 0}, "description": q.prompt}
        if q.type == "count":
            return {"type": ["integer", "null"], "minimum": 0, "description": q.prompt,
                    **({"maximum": q.max} if q.max is not None else {})}
        if q.type == "choice":
            return {"enum": [*q.vocab, None], "description": q.prompt}
        return {"type": ["array", "null"], "items": {"enum": list(q.vocab)}, "uniqueItems": True,
                "description": q.prompt}

    props = {q.id: one(q) for q in rung.questions if q.type != "table"}
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema",
           "title": f"crashlab workshop worksheet: {rung.id}", "type": "object",
           "required": ["rung", "answers"], "additionalProperties": False,
           "properties": {"rung": {"const": rung.id},
                          "answers": {"type": "object", "additionalProperties": False, "properties": props}}}
    if rows:
        cell = {c: {"enum": [*v, None]} for c, v in columns(rung).items()}
        out["properties"]["table"] = {
            "type": "object", "additionalProperties": False,
            "properties": {r: {"type": "object", "additionalProperties": False, "properties": cell,
                               "description": label} for r, _, label in rows}}
    return out


# --------------------------------------------------------------------------- reading
def read(path: Path, rung: Rung) -> tuple[dict, dict]:
    """(answers, table) from a worksheet; UsageError naming file, line and field."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no worksheet here; run `crashlab workshop start {rung.id}` first") from None
    try:
        doc = parse_yaml(text, file=str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise UsageError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except Exception as exc:  # noqa: BLE001 - duplicate keys and the like from the line loader
        line = getattr(exc, "line", None)
        raise UsageError(f"{path}{':' + str(line) if line else ''}: {getattr(exc, 'message', exc)}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a worksheet is a mapping with 'rung' and 'answers'")

    def fail(container, key, message):
        line = getattr(container, "lines", {}).get(key, getattr(container, "line", None)) \
            if isinstance(getattr(container, "lines", None), dict) else getattr(container, "line", None)
        raise UsageError(f"{path}{':' + str(line) if line else ''}: field '{key}': {message}")

    if doc.get("rung") != rung.id:
        fail(doc, "rung", f"this worksheet is for rung {doc.get('rung')!r}, not {rung.id!r}")
    known = {q.id: q for q in rung.questions if q.type != "table"}
    for key in doc:
        if key in ("rung", "answers", "table"):
            continue
        if key in known:
            fail(doc, key, "this answer is at the top level; indent it under 'answers:' as the template shows")
        if key in {r.id for r in rung.rows} or str(key).startswith("r") and str(key)[1:].isdigit():
            fail(doc, key, "this row is at the top level; indent it under 'table:' as the template shows")
        fail(doc, key, "not a worksheet field; a worksheet has rung, answers and (table rungs) table")
    answers = doc.get("answers") or {}
    if not isinstance(answers, dict):
        fail(doc, "answers", "must be a mapping of question id to answer")
    answers = {k: _as_template(known.get(k), v) for k, v in answers.items()}
    for qid, value in answers.items():
        if qid not in known:
            fail(doc.get("answers"), qid, f"no such question; the questions are {', '.join(known)}")
        if value is not None:
            _check_type(known[qid], value, lambda m, q=qid: fail(doc.get("answers"), q, m))
    table = doc.get("table") or {}
    if table and not isinstance(table, dict):
        fail(doc, "table", "must be a mapping of row id to cells")
    cols = columns(rung)
    for row_id, cells in table.items():
        if not isinstance(cells, dict):
            fail(table, row_id, "a row is a mapping of column to value")
        for col, value in list(cells.items()):
            value = as_word(value)
            if col not in cols:
                fail(cells, col, f"no such column; the columns are {', '.join(cols)}")
            if value is not None and value not in cols[col]:
                fail(cells, col, f"{value!r} is not in the vocabulary ({', '.join(map(str, cols[col]))})")
    return dict(answers), {k: {c: as_word(v) for c, v in cells.items()} for k, cells in table.items()}


def as_word(value: Any) -> Any:
    """YAML reads the template's bare ``yes``/``no`` (and on/off) as booleans: take them as the words."""
    return {True: "yes", False: "no"}.get(value, value) if isinstance(value, bool) else value


def _as_template(q, value: Any) -> Any:
    """An answer as the template shows it: a yes/no choice written bare, one value for a set."""
    if q is None or value is None:
        return value
    if q.type == "choice":
        return as_word(value)
    if q.type == "set" and not isinstance(value, list):
        return [as_word(value)]
    if q.type == "events" and isinstance(value, int) and not isinstance(value, bool):
        return [value]
    return value


def _check_type(q, value: Any, fail) -> None:
    if q.type in ("event", "count"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            fail("expected a whole number" + (" (an event sequence number)" if q.type == "event" else ""))
        if q.max is not None and value > q.max:
            fail(f"at most {q.max}")
    elif q.type == "events":
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            fail("expected a list of event sequence numbers, e.g. [12, 40]")
    elif q.type == "choice":
        if value not in q.vocab:
            fail(f"{value!r} is not in the vocabulary ({', '.join(map(str, q.vocab))})")
    elif q.type == "set":
        if not isinstance(value, list):
            fail("expected a list of values, e.g. [a, b]")
        bad = [v for v in value if v not in q.vocab]
        if bad:
            fail(f"{bad[0]!r} is not in the vocabulary ({', '.join(map(str, q.vocab))})")


# --------------------------------------------------------------------------- grading
def grade(rung: Rung, answers: dict, table: dict, expected: dict | None = None, offset=None,
          held: frozenset = frozenset()) -> Grade:
    """``offset``: the learner's kit's event numbering (evidence.Numbering; their answers are read back).
    ``held``: fields that took MAX_TRIES wrong answers; they are not graded (the learner reads
    the trace instead of trying again)."""
    expected = expected if expected is not None else K.expected(rung)
    passed, wrong, blank_, held_, tried = [], [], [], [], []
    for q in rung.questions:
        if q.type == "table":
            continue
        value = answers.get(q.id)
        if q.id in held:
            held_.append(q.id)
            continue
        if value is None:
            blank_.append(q.id)
            continue
        shown = value
        if q.type == "events":
            value = [offset.canon(v) for v in value] if offset else value
        elif q.type == "event":
            value = offset.canon(value) if offset else value
        problem = expected[q.id].judge(value)
        if problem is None:
            passed.append(q.id)
            continue
        tried.append((q.id, _tried(shown)))
        if q.type == "event":
            wrong.append(f"{q.id}: event #{shown} is not the evidence asked for")
        else:
            wrong.append(f"{q.id}: your answer {problem}" + _why(q, value, expected[q.id]))
    for row_id, cells in expected.get("table", {}).items():
        given = table.get(row_id, {})
        for col, exp in cells.items():
            name = f"{row_id}.{col}"
            if name in held:
                held_.append(name)
            elif given.get(col) is None:
                blank_.append(name)
            elif exp.judge(given[col]) is None:
                passed.append(name)
            else:
                tried.append((name, _tried(given[col])))
                wrong.append(f"row {row_id}, column {col}: not what the trace shows at that event")
    return Grade(passed=tuple(passed), wrong=tuple(wrong), blank=tuple(blank_), held=tuple(held_), tried=tuple(tried))


def _tried(value: Any) -> str:
    """A wrong answer as the progress file counts it (the same answer checked again is one try)."""
    return str(sorted(map(str, value)) if isinstance(value, list) else value)


@functools.cache
def misconceptions() -> dict:
    """data/misconceptions.yaml: vocabulary -> wrong value -> misconception, quote, look."""
    return yaml.safe_load((DATA / "misconceptions.yaml").read_text(encoding="utf-8"))


def _vocab_name(q) -> str | None:
    return next((name for name, values in vocabularies().items() if values == q.vocab), None)


def _why(q, value: Any, exp) -> str:
    """The misconception a wrong closed answer usually comes from, the chapter against it, and
    where to look; never the right value. A set: the first value it should not hold."""
    table = misconceptions()["vocabularies"].get(_vocab_name(q) or "", {})
    if q.type == "choice":
        picked = [value]
    elif q.type == "set":
        picked = [v for v in value if v not in exp.accepted]
    else:
        return ""
    for v in picked:
        entry = table.get(v)
        if entry:
            return f"\n           {v}: " + belief(entry, "\n           ")
    return ""


def belief(entry: dict, sep: str) -> str:
    """One misconception entry as feedback: the belief, the chapter against it, where to look."""
    return (f"a common reason is the belief that {entry['misconception']}; "
            f"the chapter: \"{entry['quote']}\"{sep}look at {entry['look']}")


def code_belief(rung_id: str, scenario: str) -> dict | None:
    """The misconception a code rung's failing scenario usually exposes (data/misconceptions.yaml,
    ``code:``): the scenario was chosen so that the decision built on that belief fails it."""
    return (misconceptions().get("code", {}).get(rung_id) or {}).get(scenario)


# --------------------------------------------------------------------------- a learner's own rows
def row_ids(rung: Rung, offset=None, variant: str | None = None) -> dict[str, str]:
    """Canonical row id -> the id the learner's kit shows. A drill row is named by its event
    (renumbered by ``offset``); the rows of a learner's kit get their ids in an order of their own
    (``r1``..), so a neighbour's table, keyed by row, does not pass as is."""
    if rung.kind != "table":
        return {}
    from . import evidence as E
    rows = K.anchors(rung, E.trace(rung.scenario, K.REFERENCE))
    if rung.rows_from is not None:
        return {row_id: f"e{offset.kit(seq) if offset else seq}" for row_id, seq, _ in rows}
    if not variant:
        return {row_id: row_id for row_id, _, _ in rows}
    order = sorted((row_id for row_id, _, _ in rows),
                   key=lambda i: hashlib.sha256(f"{variant}\0{i}".encode()).hexdigest())
    return {row_id: f"r{order.index(row_id) + 1}" for row_id, _, _ in rows}


def _row_question(q, ids: dict) -> bool:
    return q.type == "set" and bool(ids) and set(q.vocab) == set(ids)


def to_canonical(rung: Rung, answers: dict, table: dict, ids: dict) -> tuple[dict, dict]:
    """A learner's answers with their row ids read back as the canonical ones."""
    if not ids or all(k == v for k, v in ids.items()):
        return answers, table
    back = {kit: canon for canon, kit in ids.items()}
    table = {back.get(k, f"unknown:{k}"): cells for k, cells in table.items()}
    answers = dict(answers)
    for q in rung.questions:
        if _row_question(q, ids) and isinstance(answers.get(q.id), list):
            answers[q.id] = [back.get(v, v) for v in answers[q.id]]
    return answers, table


def model_answers(rung: Rung, offset=None, variant: str | None = None) -> dict:
    """The model answer (for reveal and for tests), in the numbering of a kit moved by ``offset``
    (and, for a learner's kit, with the row ids of ``variant``)."""
    out = {"answers": {}, "table": {}}
    if not rung.graded_by_worksheet and rung.kind != "exhibits":
        return out
    expected = K.expected(rung)
    ids = row_ids(rung, offset, variant)
    for qid, exp in expected.items():
        if qid == "table":
            out["table"] = {ids.get(r, r): {c: e.shown for c, e in cells.items()} for r, cells in exp.items()}
        else:
            q = next((x for x in rung.questions if x.id == qid), None)
            shown = exp.shown
            if offset and q is not None and q.type == "event" and isinstance(shown, int):
                shown = offset.kit(shown)
            elif offset and q is not None and q.type == "events" and isinstance(shown, list):
                shown = [offset.kit(v) for v in shown]
            elif q is not None and _row_question(q, ids) and isinstance(shown, list):
                shown = sorted(ids.get(v, v) for v in shown)
            out["answers"][qid] = shown
    return out

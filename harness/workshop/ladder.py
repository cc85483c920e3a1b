"""The ladder: the rung definitions of data/rungs.yaml as frozen values.

Everything here may be shown to a learner. Answer keys are in data/answers.yaml, read only
by crashlab.workshop.keys.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from ..vocab.errors import UsageError
from .evidence import DATA
from .exhibits import questions as exhibit_questions
from .questions import Question

@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    id: str
    at: dict
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rung:
    id: str
    title: str
    kind: str                     # trace | table | exhibits | handoff | designs | rubric
    chapter: str
    question: str
    scenario: str | None = None
    extra_scenarios: tuple[str, ...] = ()
    starter: str | None = None
    wire_starter: str | None = None       # a standalone wire-protocol variant of the starter
    code_scenario: str | None = None      # the scenario the code is graded on first (default: scenario)
    code_scenarios: tuple[str, ...] = ()  # and the others, where a shortcut fails
    code_task: str | None = None
    questions: tuple[Question, ...] = ()
    hints: tuple[str, ...] = ()
    rows: tuple[Row, ...] = ()
    rows_from: dict | None = None
    columns: dict = field(default_factory=dict)    # column -> vocabulary name
    column_hints: dict = field(default_factory=dict)   # column -> where to look when a cell is wrong

    @property
    def scenarios(self) -> tuple[str, ...]:
        return ((self.scenario,) if self.scenario else ()) + self.extra_scenarios

    def field_hint(self, name: str) -> str | None:
        """The hint for one field: a question id, ``row.column`` of a table, or ``run X`` of a plan."""
        if "." in name:
            return self.column_hints.get(name.split(".", 1)[1])
        return next((q.hint for q in self.questions if q.id == name), None)

    @property
    def graded_by_worksheet(self) -> bool:
        return self.kind in ("trace", "table", "designs", "rubric")


@functools.cache
def _doc() -> dict:
    return yaml.safe_load((DATA / "rungs.yaml").read_text(encoding="utf-8"))


def vocabularies() -> dict[str, tuple]:
    return {k: tuple(v) for k, v in _doc()["vocabularies"].items()}


def vocab(name_or_list: Any) -> tuple:
    if isinstance(name_or_list, list):
        return tuple(name_or_list)
    return vocabularies()[name_or_list]


@functools.cache
def rungs() -> tuple[Rung, ...]:
    out = []
    for raw in _doc()["rungs"]:
        questions = tuple(Question(id=q["id"], type=q["type"], prompt=q["prompt"],
                                   vocab=vocab(q["vocab"]) if "vocab" in q else (), max=q.get("max"),
                                   hint=q.get("hint"))
                          for q in raw.get("questions", ()))
        rows = tuple(Row(id=r["id"], at=dict(r["at"]), label=r["label"]) for r in raw.get("rows", ()))
        out.append(Rung(id=raw["id"], title=raw["title"], kind=raw["kind"], chapter=" ".join(raw["chapter"].split()),
                        question=raw["question"], scenario=raw.get("scenario"),
                        extra_scenarios=tuple(raw.get("extra_scenarios", ())), starter=raw.get("starter"),
                        code_scenario=raw.get("code_scenario"),
                        code_scenarios=tuple(raw.get("code_scenarios", ())), wire_starter=raw.get("wire_starter"),
                        code_task=" ".join(raw["code_task"].split()) if raw.get("code_task") else None,
                        questions=questions, hints=tuple(raw.get("hints", ())), rows=rows,
                        rows_from=raw.get("rows_from"), columns=dict(raw.get("columns", {})),
                        column_hints=dict(raw.get("column_hints", {}))))
    return tuple(out)


def rung(rung_id: str) -> Rung:
    for r in rungs():
        if r.id == rung_id:
            if r.kind == "exhibits" and not r.questions:
                return replace(r, questions=exhibit_questions())
            return r
    raise UsageError(f"no rung {rung_id!r}; `crashlab workshop list` shows the ladder "
                     f"({', '.join(r.id for r in rungs())})")


TRACE_LABELS = ("A", "B", "C", "D", "E")

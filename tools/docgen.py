"""Regenerate everything in docs/ (and the scenario JSON Schema) that is derived from crashlab's
own tables: repository tooling, not shipped in the package.

    python tools/docgen.py          # rewrite every generated document and section
    python tools/docgen.py --check  # exit 1 naming what is out of date, change nothing

Sections of docs/adapters.md, docs/protocol.md, docs/trace.md, docs/scenarios.md and CHANGELOG.md
(from crashlab/data/rules.json). Whole documents: docs/invariants.md, docs/rubric.md, docs/detection-matrix.md, docs/gallery.md
(the gallery run on the library takes a few seconds) and harness/data/scenario.schema.json.
Sections are delimited by ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` markers.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crashlab.report.changelog import changelog_entries, fixes_markdown  # noqa: E402
from crashlab.checks.docs import invariants_markdown, rubric_markdown  # noqa: E402
from crashlab.vocab.event_tables import kinds_markdown  # noqa: E402
from crashlab.world.ports import arguments_markdown  # noqa: E402
from crashlab.scenario.schema import SCHEMA_PATH, library_table, schema_text  # noqa: E402
from crashlab.vocab.model import (CHECKPOINT_FIELD_MEANINGS, CHECKPOINT_FIELDS, EFFECT_ENTRY_FIELD_MEANINGS,  # noqa: E402
                           EFFECT_ENTRY_FIELDS, KNOWLEDGE_TRANSITIONS, Knowledge, RunState)

_NAMES = {str: "string", int: "integer", dict: "object", list: "array", type(None): "null", bool: "boolean",
          float: "number"}


def field_table(fields, meanings) -> str:
    rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
    for spec in fields:
        kind = " or ".join(_NAMES[t] for t in spec.types)
        if spec.enum:
            kind += " (" + ", ".join(f"`{v}`" for v in sorted(spec.enum)) + ")" if len(spec.enum) <= 3 else \
                " (one of the states below)"
        rows.append(f"| `{spec.path}` | {kind} | {'yes' if spec.required else 'no'} | {meanings[spec.path]} |")
    return "\n".join(rows) + "\n"


def knowledge_table() -> str:
    rows = ["| knowledge | may move to |", "|---|---|"]
    for state in Knowledge:
        nxt = sorted(k.value if hasattr(k, "value") else str(k) for k in KNOWLEDGE_TRANSITIONS.get(state, ()))
        rows.append(f"| `{state.value}` | {', '.join(f'`{n}`' for n in nxt) or '(final)'} |")
    return "\n".join(rows) + "\n"


def run_states() -> str:
    return ", ".join(f"`{s.value}`" for s in RunState) + "\n"


SECTIONS = {
    "docs/adapters.md": {"fields:checkpoint": lambda: field_table(CHECKPOINT_FIELDS, CHECKPOINT_FIELD_MEANINGS),
                         "fields:effect-entry": lambda: field_table(EFFECT_ENTRY_FIELDS, EFFECT_ENTRY_FIELD_MEANINGS),
                         "fields:knowledge": knowledge_table, "fields:run-states": run_states,
                         "fixes": fixes_markdown},
    "docs/trace.md": {"trace:kinds": kinds_markdown},
    "CHANGELOG.md": {"changelog": changelog_entries},
    "docs/scenarios.md": {"library": library_table},
    "docs/protocol.md": {"ports:arguments": arguments_markdown,
                         "fields:checkpoint": lambda: field_table(CHECKPOINT_FIELDS, CHECKPOINT_FIELD_MEANINGS),
                         "fields:effect-entry": lambda: field_table(EFFECT_ENTRY_FIELDS, EFFECT_ENTRY_FIELD_MEANINGS)},
}


def render(text: str, sections: dict) -> str:
    for name, make in sections.items():
        begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
        head, sep, rest = text.partition(begin)
        if not sep:
            raise SystemExit(f"tools/docgen.py: no '{begin.strip()}' marker")
        _, sep, tail = rest.partition(end)
        if not sep:
            raise SystemExit(f"tools/docgen.py: no '{end}' marker")
        text = head + begin + make() + end + tail
    return text


def documents() -> dict[Path, str]:
    """Every whole generated file and its fresh text."""
    from crashlab.gallery.matrix import DOCUMENTS, evaluate_all

    out = {ROOT / "docs" / "invariants.md": invariants_markdown(), ROOT / "docs" / "rubric.md": rubric_markdown(),
           SCHEMA_PATH: schema_text()}
    outcomes = evaluate_all()
    out.update({ROOT / "docs" / name: render(outcomes) for name, render in DOCUMENTS.items()})
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    fresh = {ROOT / rel: render(ROOT.joinpath(rel).read_text(encoding="utf-8"), sections)
             for rel, sections in SECTIONS.items()}
    fresh.update(documents())
    stale = []
    for path, text in fresh.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(str(path.relative_to(ROOT)))
            if not check:
                path.write_text(text, encoding="utf-8")
    if stale and check:
        print(f"out of date: {', '.join(stale)}; run python tools/docgen.py", file=sys.stderr)
        return 1
    print("up to date" if not stale else f"rewrote: {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

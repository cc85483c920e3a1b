"""Golden traces: the reference adapter's archived traces, as regression evidence.

AR-08 "Handoff rehearsal": archive the completed traces with their contract versions and
expected terminal states; a new implementation earns compatibility by reproducing them.
``traces/`` holds one JSONL trace per library scenario and ``traces/MANIFEST.json`` with,
per scenario, the seed, the contract versions, the terminal states and the trace digest.

    python tools/golden.py               # compare: exit 1 and name every difference
    python tools/golden.py --update      # rewrite traces/ from the current reference adapter

(``tools/`` is repository tooling; this module only generates and compares.)
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .drivers import DEFAULT_ADAPTER, load_adapter
from .runner import run_scenario
from ..vocab.compiled import Scenario
from ..scenario.loader import library

GOLDEN_DIR = Path(__file__).resolve().parent.parent.parent / "traces"


def _entry(scenario: Scenario, text: str) -> dict:
    events = [json.loads(line) for line in text.splitlines()]
    end = events[-1]
    return {"trace": f"{scenario.id}.jsonl", "seed": scenario.seed, "contract": dict(scenario.env),
            "terminal": {run: state["finished"] or state["waiting"] for run, state in end["runs"].items()},
            "events": len(events), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def generate(scenarios: list[Scenario] | None = None, adapter: str = DEFAULT_ADAPTER) -> dict[str, tuple[str, dict]]:
    spec = load_adapter(adapter)
    out = {}
    for sc in library() if scenarios is None else scenarios:
        text = run_scenario(sc, spec).to_jsonl()
        out[sc.id] = (text, _entry(sc, text))
    return out


def compare(folder: Path = GOLDEN_DIR) -> list[str]:
    """Every difference between the archive and a fresh run, one line each."""
    manifest = json.loads((folder / "MANIFEST.json").read_text(encoding="utf-8"))["scenarios"]
    problems = []
    fresh = generate()
    for sid in sorted(set(manifest) | set(fresh)):
        if sid not in fresh:
            problems.append(f"{sid}: archived but no longer in the library")
            continue
        if sid not in manifest:
            problems.append(f"{sid}: in the library but not archived (run python tools/golden.py --update)")
            continue
        text, entry = fresh[sid]
        old = manifest[sid]
        for field in ("contract", "terminal"):
            if entry[field] != old[field]:
                problems.append(f"{sid}: {field} changed: {old[field]} -> {entry[field]}")
        archived = (folder / old["trace"]).read_text(encoding="utf-8")
        if archived != text:
            a, b = archived.splitlines(), text.splitlines()
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            problems.append(f"{sid}: trace differs from line {first + 1} (archived {len(a)} lines, now {len(b)})")
    return problems

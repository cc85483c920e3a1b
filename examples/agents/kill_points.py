"""The measured table of an agent framework on DBOS (docs/agents/pydantic-ai.md, openai-agents.md):
holds at the kill points, for the naive agent with its tools inline, the naive agent with each tool
made a DBOS step (``--tools=step``), and the careful agent.

    python examples/agents/pydantic_ai/measure.py [--repeat=N] [--out=DIR]

For each kill point (a library scenario, or one under examples/) and each variant, it runs
``crashlab integrate --runtime NAME`` and prints the sandbox's count of holds for the run
(reservation commits: a duplicate is a hold past the first; the notification is not counted), the
distinct idempotency keys the reserve requests carried (the naive agent's key is its tool-call id,
so a new key is the model asking again), how many times the model asked for ``reserve`` in the
framework's record, whether the tool ran as a DBOS step or inline, the verdict and the rules failed.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POINTS = {
    "before the send": "crash-2-after-prepare-before-send",
    "after the commit, keyless": str(ROOT / "examples/runtimes/scenarios/keyless-crash-after-commit.yaml"),
    "after the commit, keyed": "t2-commit-before-record",
    "after the tool returned, keyless": str(ROOT / "examples/agents/scenarios/keyless-crash-after-tool.yaml"),
}
VARIANTS = (("naive", "inline", ""), ("naive", "step", "--tools=step"), ("careful", "step", ""))


def measure(runtime: str, examples: Path, argv: list[str]) -> int:
    from crashlab.integrate.run import integrate
    from crashlab.runtimes import load
    from crashlab.scenario.loader import resolve
    from crashlab.world.trace import read_jsonl

    repeat = int(next((a.split("=", 1)[1] for a in argv if a.startswith("--repeat=")), "1"))
    out = Path(next((a.split("=", 1)[1] for a in argv if a.startswith("--out=")), f"crashlab-{runtime}-measure"))
    rt = load(runtime)
    server = rt.start(out / "runtime")
    print("| kill point | scenario | example | tools | holds | keys sent | reserve calls in the record | verdict "
          "| rules failed |")
    print("|---|---|---|---|---|---|---|---|---|")
    try:
        for point, name in POINTS.items():
            sc = resolve(name)
            for example, tools, option in VARIANTS:
                holds, keys, asks, verdicts, failed = [], [], [], [], set()
                for i in range(repeat):
                    cmd = f"{sys.executable} {examples / example}.py {option}".strip()
                    outcome = integrate(sc, worker=cmd, out=out / f"{example}-{tools}-{i}", runtime=rt, server=server)
                    events = read_jsonl(outcome.trace)
                    holds.append(sum(1 for e in events if e.get("kind") == "effect"
                                     and e.get("service") == "reservation" and e.get("cause") != "other_actor"))
                    keys.append(len({(e.get("args") or {}).get("key") for e in events
                                     if e.get("kind") == "call" and e.get("op") == "reserve"}))
                    found = re.search(r"called reserve (\d+) time", outcome.card.runtime.runs[0].summary)
                    asks.append(int(found.group(1)) if found else 0)
                    verdicts.append(outcome.card.verdict)
                    failed |= {line.invariant for line in outcome.card.lines if line.status == "fail"}
                print(f"| {point} | `{sc.id}` | {example} | {tools} | {', '.join(map(str, holds))} | "
                      f"{', '.join(map(str, keys))} | {', '.join(map(str, asks))} | {', '.join(verdicts)} | "
                      f"{', '.join(sorted(failed)) or 'none'} |", flush=True)
    finally:
        server.stop()
    return 0

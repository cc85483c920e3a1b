"""The table of docs/agents/langgraph.md: duplicates at the kill points, naive against careful, under
each of LangGraph's durability modes.

    python examples/agents/langgraph/measure.py [--repeat N] [--out DIR]

For each kill point (a library scenario, or examples/runtimes/scenarios/keyless-crash-after-commit.yaml),
each example and each ``durability`` mode, it runs ``crashlab integrate --runtime langgraph`` and
prints the sandbox's count of commits for the run (a duplicate is a commit past the first), the
distinct idempotency keys the reserve requests carried (the naive agent's key is its tool_call_id, so
a new key is the model asking again), how many reserve calls LangGraph's record kept, the verdict
and the rules failed.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
POINTS = {
    "before the send": "crash-2-after-prepare-before-send",
    "after the commit, keyless": str(ROOT / "examples/runtimes/scenarios/keyless-crash-after-commit.yaml"),
    "after the commit, keyed": "t2-commit-before-record",
    "after the tool's step was recorded": "t3-record-before-response",
}
MODES = ("async", "sync", "exit")


def main(argv: list[str]) -> int:
    from crashlab.integrate.run import integrate
    from crashlab.runtimes import load
    from crashlab.scenario.loader import resolve
    from crashlab.world.trace import read_jsonl

    repeat = int(next((a.split("=", 1)[1] for a in argv if a.startswith("--repeat=")), "1"))
    out = Path(next((a.split("=", 1)[1] for a in argv if a.startswith("--out=")), "crashlab-langgraph-measure"))
    rt = load("langgraph")
    server = rt.start(out / "runtime")
    print("| kill point | scenario | durability | example | commits | keys sent | reserve calls in LangGraph's record "
          "| verdict | rules failed |")
    print("|---|---|---|---|---|---|---|---|---|")
    try:
        for point, name in POINTS.items():
            sc = resolve(name)
            for mode in MODES:
                for example in ("naive", "careful"):
                    commits, keys, asks, verdicts, failed = [], [], [], [], set()
                    for i in range(repeat):
                        cmd = f"{sys.executable} {ROOT / 'examples/agents/langgraph' / example}.py --durability={mode}"
                        outcome = integrate(sc, worker=cmd, out=out / f"{example}-{mode}-{i}", runtime=rt,
                                            server=server)
                        card = outcome.card
                        keys.append(len({(e.get("args") or {}).get("key") for e in read_jsonl(outcome.trace)
                                         if e.get("kind") == "call" and e.get("op") == "reserve"}))
                        run = card.runtime.runs[0]
                        commits.append(run.commits)
                        found = re.search(r"called reserve (\d+) time", run.summary)
                        asks.append(int(found.group(1)) if found else 0)
                        verdicts.append(card.verdict)
                        failed |= {line.invariant for line in card.lines if line.status == "fail"}
                    print(f"| {point} | `{sc.id}` | {mode} | {example} | {', '.join(map(str, commits))} | "
                          f"{', '.join(map(str, keys))} | "
                          f"{', '.join(map(str, asks))} | {', '.join(verdicts)} | "
                          f"{', '.join(sorted(failed)) or 'none'} |", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Shared by the durable-runtime tests: run an example under a runtime, find what outlived it."""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the plain careful integration worker (examples/integration/worker.py)
WORKER = ROOT / "examples" / "integration" / "worker.py"
KEYLESS_502 = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"
KEYLESS_CRASH = ROOT / "examples" / "runtimes" / "scenarios" / "keyless-crash-after-commit.yaml"


def example(runtime: str, name: str, out: Path) -> str:
    """The example's worker command; the output folder rides in its command line so leftovers are found."""
    return f"{sys.executable} {ROOT / 'examples' / 'runtimes' / runtime / name}.py --out-marker={out}"


def independent(runtime: str, out: Path) -> str:
    """The worker a stranger wrote for ``runtime`` from README.md and docs/ alone (gallery/independent/)."""
    return f"{sys.executable} {ROOT / 'gallery' / 'independent' / runtime}_worker.py --out-marker={out}"


def alive_with(marker: str) -> list[int]:
    """Live processes whose command line carries ``marker``: workers and servers, not this test process
    and not crashlab itself (``python -m crashlab ...``, whose command line names the folder too)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z" and " -m crashlab " not in cmd:
            found.append(int(pid))
    return found


def no_leftovers(marker: str) -> None:
    deadline = time.monotonic() + 5
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive_with(marker), "a process outlived its run"


def closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return False
    except OSError:
        return True


def statuses(outcome) -> dict:
    return {line.invariant: line.status for line in outcome.card.lines}


def assert_handed_over_before_the_stale_worker_resumed(outcome) -> None:
    """A stalled run (matrix-lease-loss) passed, its replacement read the key, then the stale worker resumed."""
    from crashlab.world.trace import read_jsonl

    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    resume = next(i for i, e in enumerate(events) if e["kind"] == "resume")
    assert events[resume]["handover"] == "taken"
    read = next(i for i, e in enumerate(events) if e["kind"] == "call" and e["op"] in ("lookup", "search"))
    assert events[read]["worker"] == "run-82/w2" and read < resume


@pytest.fixture
def out(tmp_path):
    """A test's output folder; no process whose command line names it may be left when the test ends."""
    yield tmp_path
    no_leftovers(str(tmp_path))


def careful(out: Path, mistake: str = "") -> str:
    """The plain careful worker's command (``mistake``: ``--mistake=NAME``); the output folder is in its
    command line, so :func:`out` can find any process left behind."""
    return f"{sys.executable} {WORKER} {{url}} {{db}} {mistake} --out-marker={out}".strip()

"""crashlab integrate: a paused worker's held request, when the worker never runs again or is held long.

A request held at a ``before`` pause leaves when its worker is to run again. A worker that never runs
again (killed while stopped, or cut by the wall-clock limit) never sent it: it is not executed, and no
answer is recorded as delivered to it. Uses the ``out`` fixture of test_integrate (no process left)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from crashlab.integrate.run import integrate
from crashlab.scenario.loader import load_file
from crashlab.world.trace import read_jsonl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_integrate import PAUSED, _late_replacement, _paused_at_reserve, careful, out  # noqa: E402,F401

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


def _held(events: list[dict]) -> int:
    """The seq of the paused call."""
    return next(e["call"] for e in events if e["kind"] == "pause")


def _after(events: list[dict], seq: int) -> list[dict]:
    """What the trace records of call ``seq`` once it was made: its effects and its result."""
    return [e for e in events if e.get("call") == seq and e["kind"] in ("result", "effect")]


def _reserve_once(out: Path) -> str:
    """A worker whose first request is the reserve (it reaches the pause at once)."""
    from test_integrate import reserve_once

    return reserve_once(out, timeout=60)


def test_a_held_request_of_a_worker_cut_by_the_wall_limit_is_never_executed(out):
    sc = _paused_at_reserve("pause-cut", "1h", "2h")          # stopped far past the wall limit
    outcome = integrate(sc, worker=_reserve_once(out), out=out, wall_limit_s=3.0)
    events = read_jsonl(outcome.trace)
    assert any(e["kind"] == "adapter_fault" and e["fault"] == "step_timeout" for e in events)
    held = _held(events)
    assert _after(events, held) == [], "the killed worker's held reserve was executed and answered"
    assert not [e for e in events if e["kind"] == "resume"]


def _kill_when_stopped(out: Path, stale: str, replacement: str, done: threading.Event) -> None:
    """SIGKILL ``stale``'s group once it is stopped and ``replacement`` has started (both found by their
    CRASHLAB_WORKER, among processes whose command line names ``out``)."""
    def find(name: str, state: str | None = None) -> int | None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if str(out).encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
                    continue
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                st = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if f"CRASHLAB_WORKER={name}".encode() in env and (state is None or st == state):
                return int(pid)
        return None
    deadline = time.monotonic() + 20
    while not done.is_set() and time.monotonic() < deadline:
        pid = find(stale, "T")
        if pid is not None and find(replacement) is not None:
            os.killpg(pid, signal.SIGKILL)
            return
        time.sleep(0.02)


def test_a_replaced_worker_killed_while_stopped_is_not_resumed_and_its_request_never_leaves(out):
    done = threading.Event()
    killer = threading.Thread(target=_kill_when_stopped, args=(out, "run-82/w1", "run-82/w2", done), daemon=True)
    killer.start()
    try:
        outcome = integrate(load_file(PAUSED), worker=_late_replacement(out, 1.0), out=out)
    finally:
        done.set()
        killer.join()
    events = read_jsonl(outcome.trace)
    assert [e for e in events if e["kind"] == "takeover"]
    assert not [e for e in events if e["kind"] == "resume"], "a dead worker is recorded as resumed"
    assert _after(events, _held(events)) == [], "the dead worker's held reserve was executed and answered"
    assert outcome.card.verdict == "pass", outcome.card.text()


def test_a_request_held_longer_than_the_sandbox_hold_bound_leaves_only_at_the_resume(out, monkeypatch):
    import crashlab.sandbox.server as server

    monkeypatch.setattr(server, "MAX_HOLD_S", 0.3)          # the bound on a service's own holds
    sc = _paused_at_reserve("pause-long", "3m", "1h")         # 1.8 s (real) stopped, no takeover
    outcome = integrate(sc, worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    kinds = [e["kind"] for e in events]
    held = _held(events)
    result = next(i for i, e in enumerate(events) if e["kind"] == "result" and e["call"] == held)
    assert kinds.index("resume") < result, "the held request left while its worker was still stopped"


def test_a_finish_written_by_the_replacement_of_a_crashed_worker_is_the_replacements(out):
    from crashlab.scenario.loader import resolve

    # the first worker wrote its terminal checkpoint and died before its finish; the replacement finds
    # the decision and writes the finish (no owner in the row): the finish is the replacement's, not
    # the dead worker's whose checkpoint is the run's latest
    outcome = integrate(resolve("crash-7-after-notify-before-finish"), worker=careful(out), out=out)
    events = read_jsonl(outcome.trace)
    crash = next(e for e in events if e["kind"] == "crash")
    finish = next(e for e in events if e["kind"] == "finish")
    assert crash["worker"] == "run-82/w1" and finish["reason"] == "recorded before a crash"
    assert finish["worker"] == "run-82/w2", "a finish attributed to a worker that had crashed before it"


def test_a_crash_rule_on_a_paused_call_whose_worker_was_replaced_meanwhile_is_spent(out):
    import yaml
    from crashlab.scenario.loader import from_dict

    # the held reserve also meets a crash rule (after): by the time it leaves its worker is a zombie,
    # which no crash rule kills, so its answer is delivered as for any zombie's request; the sandbox
    # does not close the connection on a worker it does not kill (an unrecorded transport fault)
    spec = yaml.safe_load(PAUSED.read_text())
    spec["id"] = "pause-and-crash"
    spec["crashes"] = [{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "after",
                        "restart_after": "1s"}]
    outcome = integrate(from_dict(spec), worker=careful(out), out=out)
    events = read_jsonl(outcome.trace)
    assert [e for e in events if e["kind"] == "takeover"] and not [e for e in events if e["kind"] == "crash"]
    held = _held(events)
    result = next(e for e in events if e["kind"] == "result" and e["call"] == held)
    assert result["delivered"] is True, "a zombie's answer withheld by a crash rule that killed no one"
    assert outcome.card.verdict == "pass", outcome.card.text()


def test_a_worker_paused_on_two_requests_at_once_resumes_only_after_its_replacement_acted(out):
    from test_integrate import script

    # the first worker sends two reserves at once, each meeting a pause rule: it is stopped once, replaced
    # once, and must stay stopped until its (late) replacement worked on the run, for both
    # held requests, not resume at the second rule's own resume_after as if it had never been replaced
    spec = yaml_spec()
    spec["id"] = "pause-twice"
    spec["pauses"].append(dict(spec["pauses"][0], match={"port": "reservation", "op": "reserve", "nth": 2}))
    worker = script(out, """
        import http.client, json, os, sys, time, urllib.parse
        base = urllib.parse.urlsplit(sys.argv[1])
        if os.environ["CRASHLAB_EPOCH"] != "1":
            time.sleep(2.5)                  # a late replacement: it reads the first key 2.5 s after it starts
            conn = http.client.HTTPConnection(base.hostname, base.port, timeout=5)
            conn.request("GET", base.path + "/reservation/lookup?key=rsv-1")
            conn.getresponse().read()
            time.sleep(2.5)
            sys.exit(0)
        conns = [http.client.HTTPConnection(base.hostname, base.port, timeout=30) for n in (1, 2)]
        for conn in conns:
            conn.connect()
        for n, conn in enumerate(conns, 1):  # both requests on the wire before either is answered
            body = {"intent": {"tenant": "T-1", "incident": f"I-{n}", "part": "P-1", "slot": "S-1",
                               "technician": "X", "quantity": 1, "principal": "U-1"}, "retry_owner": "caller"}
            conn.request("POST", base.path + "/reservation/reserve", json.dumps(body),
                         {"Content-Type": "application/json", "Idempotency-Key": f"rsv-{n}"})
        for conn in conns:
            conn.getresponse().read()
        """) + f" --out-marker={out}"
    for attempt in range(3):      # both requests must reach the sandbox before the first stops the worker
        outcome = integrate(from_dict_(spec), worker=worker, out=out / str(attempt))
        events = read_jsonl(outcome.trace)
        if len([e for e in events if e["kind"] == "pause"]) == 2:
            break
    assert len([e for e in events if e["kind"] == "pause"]) == 2, "the two requests never met the sandbox at once"
    assert len([e for e in events if e["kind"] == "takeover"]) == 1
    first = next(i for i, e in enumerate(events) if e["kind"] == "call" and e["worker"] == "run-82/w2")
    resumes = [i for i, e in enumerate(events) if e["kind"] == "resume"]
    assert resumes and all(first < i for i in resumes), "the stale worker ran again before its replacement acted"
    assert all(events[i].get("handover") == "taken" for i in resumes)


def yaml_spec() -> dict:
    import yaml

    return yaml.safe_load(PAUSED.read_text())


def from_dict_(spec: dict):
    from crashlab.scenario.loader import from_dict

    return from_dict(spec)


def test_a_pause_that_finds_its_worker_gone_records_no_pause_and_drops_the_held_request(tmp_path):
    import subprocess

    from crashlab.integrate.supervisor import Supervisor

    sc = _paused_at_reserve("pause-gone", "5s", "1m")
    sup = Supervisor(sc, "true", out=tmp_path)
    rs = sup.runs["run-1"]
    rs.caller = sup.sandbox.register("run-1", 1)
    rs.proc = subprocess.Popen(["true"], start_new_session=True)
    rs.proc.wait()                                   # exited and reaped: its group is gone
    gate = sup.pause(rs.caller, sc.rules[0], 7)
    assert gate is not None and gate.cancelled and gate.opened.is_set()
    assert not [e for e in sup.sandbox.trace.events if e["kind"] == "pause"], "a pause recorded for no process"
    assert rs.paused == []

"""crashlab integrate: a real worker process against the sandbox, judged on the integration card.

Every test checks that no worker process is left behind (the fixture scans /proc for the
test's own output folder in a command line) and that the sandbox's port is closed."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crashlab.checks.card import MINIMUM, card
from crashlab.integrate.run import integrate, suite
from crashlab.vocab.results import ScenarioResult
from crashlab.scenario.loader import load_file, resolve
from runtime_support import alive_with, careful, out  # noqa: F401 (out: a fixture)

ROOT = Path(__file__).resolve().parent.parent
KEYLESS_502 = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc: Linux only")


def _port_of(marker: str) -> int:
    """The sandbox port in the command line of a live worker (its {url})."""
    import re

    for pid in alive_with(marker):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", cmd)
        if found:
            return int(found.group(1))
    raise AssertionError("no worker with a sandbox URL")


def _listening(port: int) -> bool:
    """Whether any socket on this machine listens on ``port`` (/proc/net/tcp and tcp6, state 0A)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def script(out: Path, body: str) -> str:
    path = out / "bad_worker.py"
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path} {{url}} {{db}}"


def failing(outcome) -> dict[str, str]:
    return {line.invariant: line.why for line in outcome.card.lines if line.status == "fail"}


@pytest.mark.parametrize("scenario", [sc.id for sc in suite()])
def test_the_careful_worker_passes_the_integration_suite(out, scenario):
    # the worker as its own next code version, as --suite runs it (--worker-next defaults to --worker)
    outcome = integrate(resolve(scenario), worker=careful(out), out=out, worker_next=careful(out))
    if outcome.card.verdict == "inconclusive":
        # a premise did not happen under this machine's timing (the card names it): run it once more
        outcome = integrate(resolve(scenario), worker=careful(out), out=out / "again", worker_next=careful(out))
    assert outcome.card.verdict == "pass", outcome.card.text()
    # the minimum set is judgeable in every scenario: passed, or with nothing in the run to judge it on
    judged = {line.invariant for line in outcome.card.lines if line.status in ("pass", "not exercised")}
    assert set(MINIMUM) <= judged
    # one verdict per trace: `crashlab check` (and the report, crashlab.check_trace) read the card's
    from crashlab.checks.verdict import check_trace
    from crashlab.cli import main
    from crashlab.world.trace import read_jsonl

    assert check_trace(read_jsonl(outcome.trace)).verdict == "pass"
    assert main(["check", str(outcome.trace)]) == 0


def test_the_careful_worker_leaves_an_unknown_effect_unknown_on_a_keyless_502(out):
    outcome = integrate(load_file(KEYLESS_502), worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    assert outcome.result.dispositions == {"run-82": "FAILED_EFFECT_UNKNOWN"}


def test_blind_retry_after_502_on_a_keyless_service_fails_eff01_and_retry01(out):
    outcome = integrate(load_file(KEYLESS_502), worker=careful(out, "--mistake=blind_retry"), out=out)
    assert outcome.card.verdict == "fail" and outcome.card.exit_code == 1
    assert {"EFF-01", "RETRY-01"} <= set(failing(outcome))


def test_sent_unknown_after_the_answer_fails_prep02(out):
    outcome = integrate(resolve("matrix-ambiguous-effect"), worker=careful(out, "--mistake=sent_unknown_after"),
                        out=out)
    assert set(failing(outcome)) == {"PREP-02"}, outcome.card.text()


def test_a_closed_connection_taken_as_not_sent_fails_retry01(out):
    outcome = integrate(resolve("matrix-weak-service"), worker=careful(out, "--mistake=closed_as_not_sent"),
                        out=out)
    assert "RETRY-01" in failing(outcome), outcome.card.text()


def test_the_integration_trace_reads_checks_and_shows_unchanged(out, capsys):
    from crashlab.checks.verdict import check_trace
    from crashlab.cli import main
    from crashlab.world.trace import read_jsonl

    outcome = integrate(resolve("t2-commit-before-record"), worker=careful(out), out=out)
    events = read_jsonl(outcome.trace)
    assert check_trace(events).verdict == "pass"
    # a rule the run gave nothing to judge is not claimed as a pass
    lines = {line.invariant: line for line in outcome.card.lines}
    assert lines["CLS-02"].status == "not exercised" and "no throttled answers" in lines["CLS-02"].why
    assert lines["RETRY-01"].status == "pass" and "not exercised (nothing in this run" in outcome.card.text()
    kinds = [e["kind"] for e in events]
    assert {"crash", "effect", "ledger", "checkpoint", "finish"} <= set(kinds)
    # the worker was blocked on the reserve when the store said SENT_UNKNOWN: the ledger event comes first
    reserve = next(e["seq"] for e in events if e["kind"] == "call" and e["op"] == "reserve")
    assert any(e["kind"] == "ledger" and e["knowledge"] == "SENT_UNKNOWN" and e["seq"] < reserve for e in events)
    assert main(["check", str(outcome.trace)]) == 0
    assert "repro: crashlab integrate t2-commit-before-record --worker" in capsys.readouterr().out
    assert main(["show", str(outcome.trace)]) == 0
    assert main(["report", str(outcome.trace), "--out", str(out / "report"), "-q"]) == 0
    assert (out / "report" / "index.html").exists() and (out / "report" / "figures").is_dir()


def test_the_supervisors_grant_is_its_own_lease_record_and_never_a_worker_call(out):
    from crashlab.checks.verdict import check_raw, check_trace
    from crashlab.world.trace import read_jsonl

    outcome = integrate(resolve("t2-commit-before-record"), worker=careful(out), out=out)
    events = read_jsonl(outcome.trace)
    grants = [e for e in events if e["kind"] == "lease"]
    assert [g["owner"] for g in grants] == ["run-82/w1", "run-82/w2"]
    assert all(g["granted_by"] == "supervisor" and "call" not in g for g in grants)
    assert not [e for e in events if e["kind"] == "call" and e["port"] == "lease"]   # no worker asked for it
    # an integration trace is not exempt from LEASE-01: a lease call asked for hours is caught there too
    seq = max(e["seq"] for e in events[:-1]) + 1
    asked = {"seq": seq, "t": events[-2]["t"], "lane": "port", "kind": "call", "worker": "run-82/w2", "run": "run-82",
             "port": "lease", "op": "acquire", "args": {"ttl_ms": 7_200_000}, "nth": 1}
    end = dict(events[-1], seq=seq + 1)
    edited = events[:-1] + [asked, end]
    found = [v for v in check_raw(edited).violations if v.invariant == "LEASE-01"]
    assert found and "2 h lease" in found[0].message
    # the card cannot judge a real worker's lease, so its verdict (every reader's) keeps the finding as a note
    result = check_trace(edited)
    assert "LEASE-01" not in {v.invariant for v in result.violations}
    assert any(n.startswith("LEASE-01 not judgeable") and "2 h lease" in n for n in result.notes)


def test_an_exiting_worker_is_a_recorded_fault(out):
    worker = script(out, "import sys; print('boom: no database today'); sys.exit(3)\n")
    outcome = integrate(resolve("matrix-throttling"), worker=worker, out=out)
    assert outcome.card.verdict == "fail"
    fault = [e for e in outcome.result.violations if e.invariant == "ADAPTER-FAULT"]
    assert fault and "code 3" in fault[0].message and "boom" in fault[0].message


def test_an_unresponsive_worker_is_a_recorded_fault_and_inconclusive(out):
    worker = script(out, "import time\nwhile True: time.sleep(1)\n")
    outcome = integrate(resolve("matrix-throttling"), worker=worker, out=out, wall_limit_s=1.0)
    assert outcome.card.verdict == "inconclusive" and outcome.card.exit_code == 2
    assert any("did not end within 1 s" in r for r in outcome.card.reasons)


def test_a_flooding_worker_is_a_recorded_fault(out):
    worker = script(out, "import sys\nwhile True: sys.stdout.write('x' * 65536)\n")
    outcome = integrate(resolve("matrix-throttling"), worker=worker, out=out, wall_limit_s=20.0)
    fault = [e for e in outcome.result.violations if e.invariant == "ADAPTER-FAULT"]
    assert fault and "MiB of output" in fault[0].message


def test_a_worker_with_no_store_views_is_inconclusive_not_a_pass(out):
    # finishes by writing a finish table but no ledger or checkpoint views: nothing to judge it by
    worker = script(out, """
        import sqlite3, sys
        db = sqlite3.connect(sys.argv[2], isolation_level=None)
        db.execute("CREATE TABLE crashlab_finish (seq INTEGER PRIMARY KEY, record TEXT)")
        db.execute("INSERT INTO crashlab_finish (record) VALUES ('{\\"disposition\\": \\"FAILED_NO_EFFECT\\"}')")
        """)
    outcome = integrate(resolve("matrix-throttling"), worker=worker, out=out)
    assert outcome.card.verdict in ("inconclusive", "fail")
    missing = [line for line in outcome.card.lines if line.invariant in MINIMUM and line.status == "not judgeable"]
    assert missing and "views were not readable" in missing[0].why


def test_the_card_is_inconclusive_when_a_minimum_rule_cannot_be_judged():
    result = ScenarioResult(id="x", title="x", verdict="pass", dispositions={}, violations=(), notes=(), seed=0,
                            repro="", trace=None, tags=())
    full = card(result, views={"ledger", "checkpoints", "finish"})
    assert full.verdict == "pass" and "limitation: synthetic service on loopback" in full.text()
    partial = card(result, views={"finish"})
    assert partial.verdict == "inconclusive" and partial.exit_code == 2
    assert any("PREP-02 is in the minimum set" in r for r in partial.reasons)


def test_a_refusal_a_socket_cannot_tell_apart_is_recognized_by_its_code_not_its_wording(out):
    from crashlab.vocab.results import Violation
    from crashlab.world.trace import read_jsonl

    outcome = integrate(resolve("matrix-timeout-before-send"), worker=careful(out), out=out)
    lines = {line.invariant: line for line in outcome.card.lines}
    assert lines["CLS-03"].status == "not judgeable" and "cannot be told" in lines["CLS-03"].why, outcome.card.text()
    # the checks' own finding (the card keeps it as a note: not judgeable is never a failure)
    from crashlab.checks.verdict import check_raw

    events = read_jsonl(outcome.trace)
    cited = next(v for v in check_raw(events).violations if v.invariant == "CLS-03")
    assert "CLS-03" not in {v.invariant for v in outcome.result.violations}
    assert any(n.startswith("CLS-03 not judgeable") for n in outcome.result.notes)
    refusal = next(e for e in events if e["seq"] == cited.events[1])
    assert refusal["error"]["code"] == "timeout_before_send"

    # the same wording citing a refusal a real worker can tell (a fence) is a failure: the code decides
    def judged(code: str) -> str:
        v = Violation(invariant="CLS-03", message="reservation.reserve #5 was refused definitely (refused, #6): ...",
                      events=(5, 6, 7))
        result = ScenarioResult(id="x", title="x", verdict="fail", dispositions={}, violations=(v,), notes=(),
                                seed=0, repro="", trace=None, tags=())
        trace = [{"seq": 6, "kind": "result", "ok": False, "error": {"code": code, "definite": True}}]
        got = card(result, views={"ledger", "checkpoints", "finish"}, trace=trace)
        return next(line.status for line in got.lines if line.invariant == "CLS-03")
    assert judged("refused") == "not judgeable"
    assert judged("fenced") == "fail"


def _integrate_a_stuck_worker(out, stderr):
    """``crashlab integrate`` as a subprocess whose worker never ends: (process, worker marker, the
    sandbox's port), once the worker runs and the sandbox listens."""
    worker = script(out, "import time\nwhile True: time.sleep(1)\n")
    marker = out / "bad_worker.py"
    proc = subprocess.Popen([sys.executable, "-m", "crashlab", "integrate", "matrix-throttling", "--worker", worker,
                             "--out", str(out / "o")], stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 20
        while not alive_with(str(marker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive_with(str(marker)), "the worker never started"
        port = _port_of(str(marker))
        assert _listening(port)
    except BaseException:
        proc.kill()
        proc.wait(timeout=10)
        raise
    return proc, marker, port


def test_killing_crashlab_itself_leaves_no_worker_behind(out):
    proc, marker, port = _integrate_a_stuck_worker(out, subprocess.DEVNULL)
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while alive_with(str(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive_with(str(marker))
    assert not _listening(port), f"the sandbox's port {port} still listens after crashlab was killed"


def test_cli_integrate_and_its_usage_errors(out, capsys):
    from crashlab.cli import main

    assert main(["integrate", "matrix-ambiguous-effect", "--worker", careful(out), "--out", str(out / "o"),
                 "--json", str(out / "cards.json")]) == 0
    text = capsys.readouterr().out
    assert "integration verdict PASS" in text and "limitation:" in text and "not judgeable: OWN-" in text
    import json
    card_json = json.loads((out / "cards.json").read_text())["integration"][0]
    assert card_json["verdict"] == "pass" and {"id": "EFF-01", "status": "pass"}.items() <= next(
        i for i in card_json["invariants"] if i["id"] == "EFF-01").items()
    assert main(["integrate", "matrix-ambiguous-effect", "--worker", careful(out), "--store", "mysql://x"]) == 3
    assert "give sqlite:{db} or postgresql://" in capsys.readouterr().err
    assert main(["integrate", "matrix-ambiguous-effect", "--worker", careful(out), "--store",
                 "postgresql://u@db.example.com/{db}"]) == 3
    assert "must be on 127.0.0.1" in capsys.readouterr().err
    assert main(["integrate", "matrix-ambiguous-effect", "--worker", "python3 w.py {nope}", "--out",
                 str(out / "p")]) == 3
    assert "unknown placeholder" in capsys.readouterr().err
    assert main(["integrate", "--worker", "x"]) == 3
    assert main(["integrate", "--worker", careful(out), "--tag", "no-such-tag"]) == 3
    assert "no library scenario has the tag no-such-tag" in capsys.readouterr().err
    assert main(["integrate", "matrix-throttling", "--worker", "no-such-worker-command {url}", "--out",
                 str(out / "q")]) == 3
    assert "no such command" in capsys.readouterr().err
    assert main(["integrate", "matrix-throttling", "--worker", careful(out), "--handover-wait", "0"]) == 3
    assert "--handover-wait must be positive" in capsys.readouterr().err


def reserve_once(out: Path, timeout: float) -> str:
    """A worker whose first request is one reserve (it meets a pause at once), with a client timeout of
    ``timeout`` s; it prints "answered STATUS" or "timed out"."""
    return script(out, f"""
        import http.client, json, sys, urllib.parse
        base = urllib.parse.urlsplit(sys.argv[1])
        conn = http.client.HTTPConnection(base.hostname, base.port, timeout={timeout})
        body = {{"intent": {{"tenant": "T-1", "incident": "I-1", "part": "P-1", "slot": "S-1",
                           "technician": "X", "quantity": 1, "principal": "U-1"}}, "retry_owner": "caller"}}
        conn.request("POST", base.path + "/reservation/reserve", json.dumps(body),
                     {{"Content-Type": "application/json", "Idempotency-Key": "rsv-1"}})
        try:
            print("answered", conn.getresponse().status, flush=True)
        except TimeoutError:
            print("timed out", flush=True)
        """) + f" --out-marker={out}"


def _paused_at_reserve(sc_id: str, resume_after: str, restart_after: str):
    """One run whose worker is paused with its first reserve held (``before``)."""
    from crashlab.scenario.loader import from_dict

    return from_dict({"id": sc_id, "title": "a pause at the reserve", "seed": 1,
                      "clock": {"origin": "10:00", "horizon": "10:30"}, "services": {"reservation": {}},
                      "runs": [{"id": "run-1", "approval": {"mode": "none"},
                                "intent": {"tenant": "T-1", "incident": "I-1", "part": "P-1", "slot": "S-1",
                                           "technician": "X", "quantity": 1, "principal": "U-1"}}],
                      "pauses": [{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "boundary": "before",
                                  "resume_after": resume_after, "restart_after": restart_after}]})


def test_a_pause_stops_and_resumes_the_worker_group(out):
    sc = _paused_at_reserve("pause-test", "5s", "1m")      # resumed before any takeover
    outcome = integrate(sc, worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    from crashlab.world.trace import read_jsonl

    kinds = [e["kind"] for e in read_jsonl(outcome.trace)]
    assert kinds.index("pause") < kinds.index("resume") and kinds.count("start") == 1


def test_ctrl_c_stops_the_run_and_leaves_nothing_behind(out):
    proc, marker, port = _integrate_a_stuck_worker(out, subprocess.PIPE)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and b"interrupted" in err and b"Traceback" not in err, err
    assert not alive_with(str(marker))
    assert not _listening(port), f"the sandbox's port {port} still listens after Ctrl-C"


@pytest.mark.parametrize("isolation", ["process", "auto"])
def test_a_worker_that_forks_out_of_its_group_is_a_recorded_fault_and_nothing_survives(out, isolation, monkeypatch):
    """Under process isolation the escape is a recorded fault; under namespaces (where they work)
    nothing escapes: the forked process dies with the worker's namespace. Nothing survives either way."""
    from crashlab.run import isolate

    monkeypatch.setenv(isolate.ENV, isolation)
    worker = script(out, """
        import os, sys, time
        if os.fork() == 0:
            os.setsid()                     # leaves the worker's process group
            while True:
                time.sleep(1)
        sys.exit(0)
        """)
    outcome = integrate(resolve("matrix-throttling"), worker=worker, out=out)
    faults = [v.message for v in outcome.result.violations if v.invariant == "ADAPTER-FAULT"]
    escaped = any("outside its process group" in m for m in faults)
    assert escaped == (isolate.current().mode == "process"), faults


PAUSED = ROOT / "examples" / "integration" / "scenarios" / "paused-past-lease.yaml"


def test_a_paused_worker_is_replaced_and_its_lease_fences_it_when_it_resumes(out):
    from crashlab.world.trace import read_jsonl

    outcome = integrate(load_file(PAUSED), worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    kinds = [e["kind"] for e in events]
    assert kinds.count("start") == 2 and "takeover" in kinds
    assert kinds.index("takeover") < kinds.index("resume")
    # the stale worker wrote nothing after it resumed: every record after the resume is the replacement's
    resumed = kinds.index("resume")
    assert not [e for e in events[resumed:] if e["kind"] in ("checkpoint", "ledger", "finish")]


def test_a_worker_without_a_lease_resumes_stale_and_fails_term01_and_own03_on_its_store(out):
    outcome = integrate(load_file(PAUSED), worker=careful(out, "--mistake=no_lease"), out=out)
    failed = failing(outcome)
    assert "TERM-01" in failed, outcome.card.text()
    assert "under lease epoch 1" in failed["OWN-03"] and "after one under epoch 2" in failed["OWN-03"]
    fenced = integrate(load_file(PAUSED), worker=careful(out / "fenced"), out=out / "fenced")
    own03 = next(line for line in fenced.card.lines if line.invariant == "OWN-03")
    assert own03.status == "pass" and "judged on the worker's store alone" in own03.why


def test_store_order_finds_a_stale_row_per_table_and_run_only():
    from crashlab.checks.card import stale_rows

    def row(seq, kind, epoch, run="r"):
        return {"seq": seq, "kind": kind, "epoch": epoch, "run": run}
    # a checkpoint under epoch 1 after a ledger row under epoch 2: two tables, two orders (not a finding)
    assert stale_rows([row(1, "ledger", 1), row(2, "ledger", 2), row(3, "checkpoint", 1)]) == []
    # another run's higher epoch is not this run's successor
    assert stale_rows([row(1, "ledger", 2, "a"), row(2, "ledger", 1, "b")]) == []
    found = stale_rows([row(1, "ledger", 1), row(2, "ledger", 2), row(3, "ledger", 1), row(4, "ledger", True)])
    assert len(found) == 1 and "(#3) landed after one under epoch 2 (#2)" in found[0]


def test_a_scenario_whose_faults_never_met_a_request_under_real_time_is_inconclusive(out):
    from crashlab.scenario.loader import from_dict

    # the cancellation is on the clock at 10:00:00.001: it reaches the worker before its first request, the
    # lost response never meets a reserve, and the scenario's point never happens
    sc = from_dict({"id": "too-early", "title": "a cancel before the worker's first request", "seed": 1,
                    "clock": {"origin": "10:00", "horizon": "10:10"}, "services": {"reservation": {}},
                    "runs": [{"id": "run-1", "approval": {"mode": "none"},
                              "intent": {"tenant": "T-1", "incident": "I-1", "part": "P-1", "slot": "S-1",
                                         "technician": "X", "quantity": 1, "principal": "U-1"}}],
                    "events": [{"at": "10:00:00.001", "type": "cancel"}],
                    "faults": [{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                "fault": "lost_response"}]})
    outcome = integrate(sc, worker=careful(out), out=out)
    assert outcome.card.verdict == "inconclusive", outcome.card.text()
    assert any("lost_response on reservation.reserve #1 did not happen: it met no request" in r for r in outcome.card.reasons)


def test_the_suite_is_the_integration_tag_and_docs_list_every_library_scenario_in_or_out():
    import re

    from crashlab.integrate.run import SUITE_TAG, exercises
    from crashlab.scenario.loader import library

    text = (ROOT / "docs" / "integration.md").read_text()
    table = text.split("<!-- the suite table: every library scenario, in or out -->")[1].split("<!-- end of")[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (in|out) \|", table, re.M))
    ids = [sc.id for sc in library()]
    assert sorted(rows) == sorted(ids), "docs/integration.md: the suite table must list every library scenario once"
    tagged = {sc.id for sc in library() if SUITE_TAG in sc.tags}
    assert {k for k, v in rows.items() if v == "in"} == tagged == {sc.id for sc in suite()}
    assert all(exercises(sc) for sc in suite()), "a suite scenario must say what it exercises with real processes"
    assert not any(r.endswith("| out | ? |") or "| out |  |" in r for r in table.splitlines())


def test_suite_means_the_tag_on_the_command_line(monkeypatch):
    import crashlab.integrate.run as run_module
    from crashlab.cli import main

    seen = []

    def stop(sc, **kw):
        seen.append(sc.id)
        raise KeyboardInterrupt       # no worker runs: the first scenario named is all this test needs
    monkeypatch.setattr(run_module, "integrate", stop)
    assert main(["integrate", "--suite", "--worker", sys.executable]) == 130
    assert seen == [suite()[0].id]


def test_a_worker_flooding_the_sandbox_with_requests_is_a_recorded_fault(out, monkeypatch):
    import crashlab.sandbox.server as server

    monkeypatch.setattr(server, "MAX_REQUESTS", 50)
    worker = script(out, """
        import http.client, sys, urllib.parse
        u = urllib.parse.urlsplit(sys.argv[1])
        while True:
            try:
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
                c.request("GET", u.path + "/inbox?after_seq=0")
                c.getresponse().read()
                c.close()
            except Exception:
                pass
        """)
    outcome = integrate(resolve("matrix-throttling"), worker=worker, out=out, wall_limit_s=20.0)
    fault = [e for e in outcome.result.violations if e.invariant == "ADAPTER-FAULT"]
    assert fault and "more than 50 requests" in fault[0].message, outcome.card.text()
    assert outcome.card.verdict in ("fail", "inconclusive")


def test_a_finished_run_leaves_no_listening_port_and_no_worker(out):
    from crashlab.integrate.supervisor import Supervisor

    sup = Supervisor(resolve("matrix-ambiguous-effect"), careful(out), out=out / "w")
    seen = []
    real_start = sup._start

    def start(rs):
        real_start(rs)
        seen.append(sup.sandbox.httpd.server_address[1])
        assert _listening(seen[-1])
    sup._start = start
    sup.run()
    assert seen and not _listening(seen[0]), "the sandbox's port still listens after the run"
    assert not alive_with(str(out))


def test_the_listening_check_sees_a_listening_socket():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert _listening(port)
    assert not _listening(port)


def test_other_actors_background_traffic_runs_beside_a_real_worker(out):
    from crashlab.world.trace import read_jsonl

    outcome = integrate(load_file(ROOT / "examples" / "integration" / "scenarios" / "background-traffic.yaml"),
                        worker=careful(out), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    effects = [e for e in read_jsonl(outcome.trace) if e["kind"] == "effect"]
    others = [e for e in effects if e["cause"] == "other_actor"]
    assert others and all(e["intent"]["part"] == "P-204" and e["intent"]["tenant"] == "T-OTHER" for e in others)
    assert [e["run"] for e in effects if e["cause"] != "other_actor"] == ["run-82"]


def test_one_unreadable_view_is_named_and_leaves_the_others_readable(tmp_path):
    """A ledger view with a renamed column is named with the database's reason; the checkpoints and
    finish views are still read (they are not reported missing)."""
    import sqlite3

    from crashlab.integrate.store import SqliteStore

    db = tmp_path / "run.sqlite"
    store = SqliteStore(db)
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE crashlab_ledger (n INTEGER, record TEXT);
        CREATE TABLE crashlab_checkpoints (version INTEGER, record TEXT);
        CREATE TABLE crashlab_finish (seq INTEGER, record TEXT);
    """)
    conn.commit()
    conn.close()
    rows = store.read()
    assert rows.problem and "crashlab_ledger" in rows.problem and "no such column" in rows.problem
    assert "ledger" not in store.views_found and {"checkpoints", "finish"} <= store.views_found


def test_an_approval_a_real_worker_never_receives_makes_the_expectations_not_judgeable():
    """An approval scenario's expectations assume the approval arrived; the sandbox cannot deliver
    it, so a miss there is not the worker's (the invariants still judge it)."""
    from crashlab.vocab.results import Violation

    miss = Violation(invariant="EXP-DISPOSITION", message="disposition WAITING_HUMAN not allowed", events=(1,))
    result = ScenarioResult(id="x", title="x", verdict="fail", dispositions={}, violations=(miss,), notes=(), seed=0,
                            repro="", trace=None, tags=())
    views = {"ledger", "checkpoints", "finish"}
    assert card(result, views=views).verdict == "fail"
    spared = card(result, views=views, undelivered=["deploy at 10:00:05"])
    line = next(line for line in spared.lines if line.invariant == "EXP-DISPOSITION")
    assert line.status == "not judgeable" and "deploy at 10:00:05 is not delivered" in line.why
    assert spared.verdict == "pass"
    from crashlab.integrate import run as run_module
    from crashlab.sandbox.server import UNDELIVERED
    assert set(UNDELIVERED) == {"deploy"} and run_module.UNDELIVERED is UNDELIVERED   # approvals: the authority port


# --------------------------------------------------------------------------- pauses held until a handover
def _late_replacement(out: Path, delay_s: float) -> str:
    """The careful worker, but the run's second worker makes its first request ``delay_s`` late, as a
    replacement does under a durable runtime that hands a stalled run over only after its own timeouts."""
    inner = careful(out)
    return f"sh -c 'if [ \"$CRASHLAB_EPOCH\" = 2 ]; then sleep {delay_s}; fi; exec {inner}'"


def _first(events: list[dict], **match) -> int:
    return next(i for i, e in enumerate(events) if all(e.get(k) == v for k, v in match.items()))


def test_a_replaced_worker_resumes_only_after_its_late_replacement_acted(out):
    from crashlab.world.trace import read_jsonl

    # the rule resumes the stale worker 1.8 s (real) after the pause; the replacement's first request
    # comes 2.5 s after the takeover: the stale worker stays stopped until the replacement had its time
    outcome = integrate(load_file(PAUSED), worker=_late_replacement(out, 2.5), out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    first_call = _first(events, kind="call", worker="run-82/w2", op="poll")
    resume = _first(events, kind="resume")
    assert _first(events, kind="takeover") < first_call < resume
    assert events[resume]["handover"] == "taken"
    # the replacement read the key and finished before the stale worker ran again
    assert first_call < _first(events, kind="call", op="lookup", worker="run-82/w2") < resume
    assert _first(events, kind="finish") < resume


def test_a_replacement_that_only_polls_the_inbox_has_not_got_the_run(out):
    from crashlab.world.trace import read_jsonl

    # the second worker process polls the inbox at once, as a runtime's worker process does before its
    # runtime hands it the run, and works on the run (reads, writes) only 2.5 s later
    poll = out / "poll.py"
    poll.write_text("import os, urllib.request\n"
                    "urllib.request.urlopen(os.environ['CRASHLAB_URL'] + '/inbox?after_seq=0').read()\n")
    worker = (f"sh -c 'if [ \"$CRASHLAB_EPOCH\" = 2 ]; then {sys.executable} {poll}; sleep 2.5; fi; "
              f"exec {careful(out)}'")
    outcome = integrate(load_file(PAUSED), worker=worker, out=out)
    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    polled = _first(events, kind="call", worker="run-82/w2", op="poll")
    read = _first(events, kind="call", worker="run-82/w2", op="lookup")
    resume = _first(events, kind="resume")
    assert polled < read < resume and events[resume]["handover"] == "taken"


def test_a_handover_that_never_came_is_inconclusive_not_a_verdict(out):
    from crashlab.world.trace import read_jsonl

    outcome = integrate(load_file(PAUSED), worker=_late_replacement(out, 3.0), out=out, handover_wait_s=0.5)
    events = read_jsonl(outcome.trace)
    resume = _first(events, kind="resume")
    assert events[resume]["handover"] == "missed"
    assert not [e for e in events[:resume] if e["kind"] == "call" and e["worker"] == "run-82/w2"
                and e["port"] != "lease"]        # (the lease call is the supervisor's grant at its start)
    text = outcome.card.text()
    assert outcome.card.verdict == "inconclusive", text
    assert "did not work on it (no read, send or store row) within 0.5 s of the takeover of run-82/w1" in text
    lines = {line.invariant: line for line in outcome.card.lines}
    assert lines["EXP-DISPOSITION"].status == "not judgeable" and "no handover" in lines["EXP-DISPOSITION"].why
    assert lines["EFF-01"].status == "pass"     # the invariants are still judged


def test_a_worker_stopped_past_its_client_timeout_finds_its_answer_waiting(out):
    # a worker with a 1 s client timeout is stopped 3 s (real) with its reserve held: the request leaves
    # when the worker is to run again, and its answer is in the socket before the worker runs
    sc = _paused_at_reserve("pause-answer", "5m", "20m")
    worker = reserve_once(out, timeout=1.0)
    integrate(sc, worker=worker, out=out)
    log = (out / "pause-answer" / "run-1.w1.log").read_text()
    assert "answered 200" in log, log

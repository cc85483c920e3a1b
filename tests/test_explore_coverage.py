"""What `crashlab explore` covers: its schedules draw every fault kind on every port (definite
refusals of compensation, unresolved notifications, reads lagging beyond the late-delivery bound,
cancellations around migrations, crashes right after a cancellation is read), and it reports the
situations it exercised (fault kind x port x phase, counted over schedules) and those it did not."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from crashlab.cli import main
from crashlab.run.drivers import load_adapter
from crashlab.run.explore import probe_calls
from crashlab.run.explore_coverage import LAG, Coverage, situations
from crashlab.vocab.model import PLATFORM_PORTS
from crashlab.scenario import from_dict, resolve
from crashlab.scenario.strategies import DEFINITE_ERRORS, STORE_FAULTS, schedules

TRACES = Path(__file__).resolve().parent.parent / "traces"


def _trace(sid):
    return [json.loads(line) for line in (TRACES / f"{sid}.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_crash_right_after_the_cancellation_is_read_is_a_situation():
    found = situations(_trace("fieldops-crash-after-cancel-read"))
    assert any(k == "crash:after" and p == "inbox" and ph.endswith("+read cancel") for k, p, ph in found), found


def test_a_cancellation_around_a_migration_and_an_unresolved_notification_are_situations():
    found = situations(_trace("combined-cancel-before-migration"))
    assert ("cancel", "world", "SENT_UNKNOWN") in found
    assert any(k == "deploy" and "+cancel" in ph for k, p, ph in found), found
    assert any(p == "notification" for _, p, _ in situations(_trace("notify-crash-delivery-unknown")))


def test_reads_lagging_beyond_the_bound_are_a_situation_and_within_it_are_not():
    header = {"kind": "header", "services": {"reservation": {"consistency": "eventual", "lag_ms": 90_000,
                                                             "max_delivery_delay_ms": 60_000}}}
    assert (LAG, "reservation", "every read") in situations([header])
    header["services"]["reservation"]["lag_ms"] = 30_000
    assert not situations([header])


def test_the_table_names_what_was_not_exercised():
    cov = Coverage()
    assert set(cov.missing(["reservation"])) == set(Coverage.universe(["reservation"]))
    cov.add({("error:validation_failed", "reservation", "CONFIRMED +cancel")})
    assert ("error:validation_failed", "reservation") not in cov.missing(["reservation"])
    table = cov.table(["reservation"])
    assert "error:validation_failed" in table and "CONFIRMED +cancel 1" in table
    assert "not exercised" in table and "lost_response@reservation" in table
    assert ("lost_response", "notification") in Coverage.universe(["notification"])


def test_every_platform_port_but_the_clock_and_the_runs_own_channel_can_be_faulted():
    wanted = {(p, o) for p, ops in PLATFORM_PORTS.items() if p not in ("clock", "random", "run") for o in ops}
    assert set(STORE_FAULTS) == wanted
    assert ("unavailable", "run") not in Coverage.universe([]) and ("crash:after", "run") in Coverage.universe([])


def _draws(sid, n=300):
    base = resolve(sid)
    calls = probe_calls(base, load_adapter(None))
    docs = []

    @settings(max_examples=n, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(schedules(dict(base.raw), calls))
    def draw(doc):
        from_dict(doc, file="generated.yaml")   # every drawn schedule is a valid scenario
        docs.append(doc)

    draw()
    return docs


def test_schedules_draw_the_situations_the_library_never_produced():
    docs = _draws("fieldops-cancelled-while-down")
    faults = [f for d in docs for f in d.get("faults") or []]
    # a definite refusal of the compensation itself
    assert any(f.get("fault") == "error" and f.get("code") in DEFINITE_ERRORS and f["match"].get("op") == "release"
               for f in faults)
    # reads lagging beyond the late-delivery bound
    assert any((d["services"].get("reservation") or {}).get("consistency") == "eventual" for d in docs)
    # a deployment with the worker restarting under the new code, and a cancellation around it
    migrations = [d for d in docs if any(e.get("type") == "deploy" for e in d.get("events") or [])]
    assert any(any(e.get("type") == "cancel" and isinstance(e.get("at"), dict) for e in d["events"]) for d in migrations)
    # a crash at the poll that reads a cancellation
    assert any(c["match"].get("port") == "inbox" and "from" in c["match"] for d in docs for c in d.get("crashes") or [])
    # faults on platform ports beyond the stores
    assert {f["match"]["port"] for f in faults if f.get("fault") == "unavailable"} >= {"authority", "operator"}


def test_schedules_fault_the_notification_when_the_base_sends_one():
    docs = _draws("crash-6-after-checkpoint-before-notify", 300)
    unresolving = {"lost_response", "late_arrival", "drop_request", "server_error_after"}   # delivery unknown
    assert any(f["match"].get("port") == "notification" and f["match"].get("op") == "send"
               and f.get("fault") in unresolving for d in docs for f in d.get("faults") or [])


def test_explore_reports_its_coverage_in_text_and_json(tmp_path, capsys):
    out_json = tmp_path / "explore.json"
    code = main(["explore", "--base", "t2-commit-before-record", "--examples", "20", "--seed", "3", "-q",
                 "--json", str(out_json), "--findings", str(tmp_path / "f")])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "coverage (schedules in which each situation occurred" in text and "not exercised" in text
    data = json.loads(out_json.read_text(encoding="utf-8"))
    rows = data["coverage"]["situations"]
    assert rows and all(set(r) == {"fault", "port", "phase", "schedules"} and r["schedules"] >= 1 for r in rows)
    assert {"fault": "pause", "port": "operator"} in data["coverage"]["not_exercised"]
    assert sum(c["tried"] for c in data["chunks"]) >= max(r["schedules"] for r in rows)

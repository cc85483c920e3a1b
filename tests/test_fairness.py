"""Fair to every correct design: each choice AR-08 leaves free keeps its points, and the real
mistake next to it is still caught. The correct designs are the independent fieldops worker
(gallery/independent) with one choice set; each mistake is a realistic edit of the same trace,
a hand-made trace, or a gallery exhibit."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "checks"))

from checks_traces import SENT, TraceBuilder  # noqa: E402

import crashlab.gallery.independent as independent  # noqa: E402
from crashlab.checks import check_trace  # noqa: E402
from crashlab.run.conformance import run_one  # noqa: E402
from crashlab.gallery.independent.fieldops import Worker  # noqa: E402
from crashlab.vocab.model import RUN_TRANSITIONS, RunState  # noqa: E402
from crashlab.scenario import library  # noqa: E402

W1 = "run-82/w1"
TIMEOUT = {"code": "timeout", "definite": False, "message": "client deadline", "details": {}}


@pytest.fixture(scope="module")
def lib():
    return {s.id: s for s in library()}


def design(monkeypatch, name: str, worker=Worker, **choices) -> str:
    """The independent worker with ``choices``, as an adapter spec."""
    cls = type(name, (independent.IndependentAdapter,), {"choices": choices, "worker": worker})
    monkeypatch.setattr(independent, name, cls, raising=False)
    return f"crashlab.gallery.independent:{name}"


def found(res) -> set[str]:
    return {v.invariant for v in res.violations}


def points(res) -> set:
    return {(v.invariant, v.point) for v in res.violations}


# --------------------------------------------------------------------------- 1: a release read by its own key
def test_a_release_verified_by_its_own_key_is_an_authoritative_read(lib, monkeypatch):
    spec = design(monkeypatch, "ReleaseByOwnKey", release_read="compensation")
    run, res = run_one(lib["handoff-3-compensation-sent-unknown"], spec)
    assert res.verdict == "pass", res.violations
    reads = [e for e in run.events if e["kind"] == "call" and e.get("op") == "lookup"
             and str(e["args"].get("key", "")).startswith("release.")]
    assert reads, "the design read the release back by its own key"
    calls = {e["seq"] for e in reads}
    # the mistakes: confirming the release although that read found nothing, or with no read at all
    events = copy.deepcopy(run.events)
    for e in events:
        if e["kind"] == "result" and e.get("call") in calls and isinstance(e.get("value"), dict):
            e["value"].update(found=False, record=None)
    hit = [v for v in check_trace(events).violations if v.invariant in ("KNOW-02", "REC-01")]
    assert hit and "release." in hit[0].message
    events = copy.deepcopy(run.events)
    for e in events:
        if e["seq"] in calls:
            e["op"] = "describe"
    hit = [v for v in check_trace(events).violations if v.invariant == "KNOW-02"]
    assert hit and "release." in hit[0].message and "no response, no read" in hit[0].message


# --------------------------------------------------------------------------- 2: keep a confirmed hold
@pytest.mark.parametrize("sid", ["t8-compensation-failure", "integration-compensation-failure",
                                 "handoff-3-compensation-sent-unknown", "handoff-3-release-undetermined"])
def test_keeping_a_confirmed_hold_after_a_cancellation_costs_nothing(sid, lib, monkeypatch):
    run, res = run_one(lib[sid], design(monkeypatch, "Keeps", compensate=False))
    assert res.verdict == "pass", res.violations
    assert run.events[-1]["runs"]["run-82"]["finished"] == "CANCELLED_EFFECT_REMAINS"
    # the mistake: keeping it without telling anyone (no escalation) is still refused
    silent = [e for e in run.events if e["kind"] != "escalation"]
    assert "EXP-EVIDENCE" in found(check_trace(silent))


def test_a_release_that_happened_is_not_reported_as_a_kept_hold(lib):
    run, res = run_one(lib["t8-compensation-failure"], "crashlab.gallery.independent:Patient")
    assert res.verdict == "pass"
    events = copy.deepcopy(run.events)
    for e in events:
        if e["kind"] == "finish":
            e["disposition"] = "CANCELLED_EFFECT_REMAINS"
    assert "TRUTH-01" in found(check_trace(events))


# --------------------------------------------------------------------------- 3: anchored events and pace
def test_a_design_that_reads_at_once_meets_the_other_actor_before_its_read(lib, monkeypatch):
    spec = design(monkeypatch, "ReadsAtOnce", early_redispatch=True, lease_ttl_ms=5_000, poll_ms=1_000)
    run, res = run_one(lib["matrix-same-key-other-parameters"], spec)
    assert res.verdict == "pass", res.violations
    # the mistake: adopting the other system's record as this run's confirmation
    _, res = run_one(lib["matrix-same-key-other-parameters"], "crashlab.gallery.blindspots:SameKeyRecordAdopted")
    assert {"TRUTH-01", "REC-01"} <= found(res)


# --------------------------------------------------------------------------- 4: retry policy and `until`
def test_a_slow_backoff_still_reaches_the_deliberate_retry(lib, monkeypatch):
    run, res = run_one(lib["seed002-deliberate-retry"], design(monkeypatch, "SlowBackoff", backoff_ms=60_000))
    assert res.verdict == "pass", res.violations
    assert any(e["kind"] == "call" and e.get("op") == "lookup" for e in run.events)
    # the mistake: recovering the admitted attempt without reading it back
    events = copy.deepcopy(run.events)
    for e in events:
        if e["kind"] == "call" and e.get("op") in ("lookup", "search"):
            e["op"] = "describe"
    assert "EXP-EVIDENCE" in found(check_trace(events))


# --------------------------------------------------------------------------- 5: the chapter's boundaries
@pytest.mark.parametrize("sid", ["t1-crash-before-dispatch", "matrix-reconciliation-down",
                                 "matrix-weak-service", "t6-duplicate-input-event"])
def test_checkpointing_only_at_the_chapters_boundaries_follows_the_table(sid, lib, monkeypatch):
    run, res = run_one(lib[sid], design(monkeypatch, "Boundaries", checkpoints="boundaries"))
    assert res.verdict == "pass", res.violations
    states = [e["state"] for e in run.events if e["kind"] == "checkpoint"]
    assert not {"APPROVED", "EFFECT_IN_FLIGHT", "RECONCILING"} & set(states), states


def _boundaries_trace(confirmed_checkpoint: bool) -> list[dict]:
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    b.checkpoint(W1, "VALIDATED", 1)
    b.checkpoint(W1, "PROPOSED", 1)
    b.append(W1, "k-1", "PROPOSED", None, 1)
    b.checkpoint(W1, "EFFECT_PREPARED", 1, effects=[("k-1", "PROPOSED")])
    b.append(W1, "k-1", "SENT_UNKNOWN", "PROPOSED", 1)
    _, ref = b.reserve(W1, "k-1")
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1, remote_ref=ref)
    if confirmed_checkpoint:
        b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return b.end(finished="SUCCEEDED")


def test_the_table_still_refuses_a_success_without_the_reconciled_effect_boundary():
    assert RunState.EFFECT_PREPARED in RUN_TRANSITIONS[RunState.PROPOSED]
    assert RunState.FAILED_EFFECT_UNKNOWN in RUN_TRANSITIONS[RunState.EFFECT_PREPARED]
    assert "TERM-01" not in found(check_trace(_boundaries_trace(True)))
    hit = [v for v in check_trace(_boundaries_trace(False)).violations if v.invariant == "TERM-01"]
    assert hit and "EFFECT_PREPARED -> SUCCEEDED" in hit[0].message
    assert all(not RUN_TRANSITIONS[t] for t in RUN_TRANSITIONS if t.value.startswith(("SUCCEEDED", "FAILED_")))


# --------------------------------------------------------------------------- 6: which read, which lease
def test_a_lease_that_outlasts_the_stall_needs_no_replacement_read(lib, monkeypatch):
    run, res = run_one(lib["matrix-lease-loss"], design(monkeypatch, "LongLease", lease_ttl_ms=300_000))
    assert res.verdict == "pass", res.violations
    assert not any(e["kind"] == "takeover" for e in run.events)
    # the mistake: a replacement (a takeover happened) that never reads the effect back
    run, res = run_one(lib["matrix-lease-loss"], "crashlab.gallery.independent:Patient")
    assert res.verdict == "pass" and any(e["kind"] == "takeover" for e in run.events)
    events = copy.deepcopy(run.events)
    for e in events:
        if e["kind"] == "call" and e.get("op") in ("lookup", "search"):
            e["op"] = "describe"
    assert "EXP-EVIDENCE" in found(check_trace(events))


def test_a_full_field_search_meets_a_generic_read_requirement_but_not_one_that_names_the_key(lib, monkeypatch):
    spec = design(monkeypatch, "SearchOnly", read_order="search-only")
    _, res = run_one(lib["crash-4-after-commit-before-record"], spec)
    assert res.verdict == "pass", res.violations
    _, res = run_one(lib["t2-commit-before-record"], spec)
    assert points(res) == {("EXP-EVIDENCE", "E4")}
    assert "'reservation.lookup'" in res.violations[0].message


# --------------------------------------------------------------------------- 7: the right point
class RunStampedKey(Worker):
    """A key that includes a volatile timestamp, fixed once per run (every attempt and worker of
    the run reuses it): stable within a run, different for a second run of the same intent."""

    def semantic_key(self, canon) -> str:
        return super().semantic_key(canon) + f"@{self.run_id}"


def test_a_key_minted_per_run_is_charged_to_stable_semantic_identity(lib, monkeypatch):
    _, res = run_one(lib["matrix-new-key-same-intent"], design(monkeypatch, "Stamped", worker=RunStampedKey))
    hit = [v for v in res.violations if v.invariant == "KEY-01"]
    assert hit and "2 runs under different keys" in hit[0].message
    _, res = run_one(lib["matrix-new-key-same-intent"], "crashlab.gallery.independent:Patient")
    assert res.verdict == "pass"


def _confirmed_after(read: str | None) -> list[dict]:
    b = TraceBuilder()
    b.clean_prefix(W1)
    b.reserve(W1, "k-1", commit=True, error=TIMEOUT)
    if read == "aggregate":
        b.io(W1, "reservation", "aggregate", part=SENT["part"], value={"part": SENT["part"], "available": 9,
                                                                      "as_of": b.t})
    b.append(W1, "k-1", "CONFIRMED", "SENT_UNKNOWN", 1)
    b.checkpoint(W1, "EFFECT_CONFIRMED", 1, effects=[("k-1", "CONFIRMED")])
    b.checkpoint(W1, "SUCCEEDED", 1, effects=[("k-1", "CONFIRMED")])
    b.finish(W1, "SUCCEEDED", effects=[("k-1", "CONFIRMED")])
    return b.end(finished="SUCCEEDED")


def test_a_stock_drop_taken_as_confirmation_is_a_reconciliation_failure():
    res = check_trace(_confirmed_after("aggregate"))
    hit = [v for v in res.violations if v.invariant == "REC-01"]
    assert hit and "aggregate read" in hit[0].message and "KNOW-02" not in found(res)
    # no read at all is still the exactly-once claim
    res = check_trace(_confirmed_after(None))
    assert any(v.invariant == "KNOW-02" and v.auto_fail for v in res.violations)


# --------------------------------------------------------------------------- 9: jitter, ceilings, lapsed leases
def test_a_backoff_slept_in_lease_keeping_chunks_is_one_backoff(lib, monkeypatch):
    spec = design(monkeypatch, "Chunked", chunked_sleeps=True, lease_ttl_ms=5_000, backoff_ms=20_000)
    run, res = run_one(lib["matrix-throttling"], spec)
    assert res.verdict == "pass", res.violations
    assert sum(1 for e in run.events if e["kind"] == "call" and e.get("op") == "sleep"
               and e["args"]["reason"].startswith("backoff")) > 2 * sum(
        1 for e in run.events if e["kind"] == "call" and e.get("op") == "draw")


def _two_backoffs(draws: int) -> list[dict]:
    b = TraceBuilder()
    b.start(W1)
    b.acquire(W1, 1)
    for n in range(2):
        if n < draws:
            b.io(W1, "random", "draw", low=0, high=100, reason="jitter", value={"value": 7})
        b.io(W1, "clock", "sleep", ms=1000, reason="backoff a", value={"now": b.t})
        b.io(W1, "lease", "renew", epoch=1, ttl_ms=5000, value={"epoch": 1, "expires_at": b.t + 5000})
        b.io(W1, "clock", "sleep", ms=1000, reason="backoff a (continued)", value={"now": b.t})
        b.io(W1, "reservation", "reserve", key="k-1", intent=dict(SENT), error={
            "code": "throttled", "definite": True, "message": "", "details": {"retry_after_ms": 1000}})
    return b.end()


def test_each_backoff_between_two_attempts_still_draws_its_own_jitter():
    assert "JIT-01" not in found(check_trace(_two_backoffs(2)))
    hit = [v for v in check_trace(_two_backoffs(1)).violations if v.invariant == "JIT-01"]
    assert len(hit) == 1


class LapsedFinisher:
    """Lets its lease lapse (nobody supersedes it), is told so by the checkpoint store, then
    reports a disposition anyway."""

    async def run(self, p):
        from crashlab.world.ports import PortError

        info = await p.run.info()
        lease = await p.lease.acquire(1_000)
        await p.clock.sleep(5_000, "the lease lapses")
        cp = {"identity": {"run_id": info["run_id"], "task_id": "t", "tenant": "T-1", "principal": "U-7"},
              "control": {"state": "VALIDATED", "state_version": 1, "owner": info["worker"],
                          "lease_epoch": lease["epoch"], "event_sequence": 0, "cancellation": {},
                          "deadline": None, "budgets": {}},
              "contract": {"schema_version": 1, "code_version": 1, "canonicalization_version": 1},
              "evidence": {}, "effects": []}
        try:
            await p.checkpoints.write(cp, 0, lease["epoch"])
        except PortError as exc:
            assert exc.code == "stale_epoch"
        await p.run.finish("FAILED_NO_EFFECT", reason="gave up")


class HandsOverThenFinishes:
    """Shortens its own lease to 1 ms (handing the run over) and finishes at once: nothing told
    it that it lost the lease, so its finish counts."""

    async def run(self, p):
        await p.run.info()
        lease = await p.lease.acquire(60_000)
        await p.lease.renew(lease["epoch"], 1)
        await p.clock.now()
        await p.run.finish("WAITING_OPERATOR", next_owner="operator", reason="handed over")


def test_a_worker_whose_lease_lapsed_is_fenced_at_finish_as_at_the_stores(lib, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "LapsedFinisher", LapsedFinisher)
    run, _ = run_one(lib["t1-crash-before-dispatch"], f"{__name__}:LapsedFinisher")
    finishes = [e for e in run.events if e["kind"] == "finish"]
    assert finishes and not finishes[0]["accepted"] and finishes[0]["stale"]
    starts = [e for e in run.events if e["kind"] == "start"]
    assert len(starts) > 1, "the platform starts a replacement for the fenced worker"
    monkeypatch.setattr(sys.modules[__name__], "HandsOverThenFinishes", HandsOverThenFinishes)
    run, _ = run_one(lib["t1-crash-before-dispatch"], f"{__name__}:HandsOverThenFinishes")
    assert next(e for e in run.events if e["kind"] == "finish")["accepted"]


# --------------------------------------------------------------------------- 8: what the CLI says
NOISY = """import json, sys
sys.stderr.write("adapter log: starting\\n")
for i in range(40):
    sys.stderr.write(f"debug {i}\\n")
sys.stderr.flush()
json.loads(sys.stdin.readline())
print(json.dumps({"id": 1, "port": "run", "op": "finish",
                  "args": {"disposition": "FAILED_NO_EFFECT", "reason": "gave up"}}), flush=True)
sys.stdin.readline()
"""


def test_run_shows_the_adapters_standard_error_bounded_when_it_fails(tmp_path, capsys):
    from crashlab.cli import STDERR_LINES, main

    script = tmp_path / "noisy.py"
    script.write_text(NOISY, encoding="utf-8")
    code = main(["run", "t1-crash-before-dispatch", "--adapter", f"exec:{sys.executable} {script}",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code != 0
    assert "adapter standard error, run-82/w1" in err and "debug 39" in err
    assert "adapter log: starting" not in err and f"last {STDERR_LINES} of 41 lines" in err


def test_run_shows_standard_error_of_a_passing_run_only_with_verbose(tmp_path, capsys):
    from crashlab.cli import main

    script = tmp_path / "logging_fieldops.py"
    source = Path(__file__).resolve().parent.parent / "gallery" / "independent"
    script.write_text(f"import sys\nsys.path.insert(0, {str(source)!r})\nsys.stderr.write('fieldops: hello\\n')\n"
                      "from fieldops import main\nmain()\n", encoding="utf-8")
    spec = f"exec:{sys.executable} {script}"
    out = str(tmp_path / "out")
    assert main(["run", "t1-crash-before-dispatch", "--adapter", spec, "--out", out]) == 0
    assert "fieldops: hello" not in capsys.readouterr().err
    assert main(["run", "t1-crash-before-dispatch", "--adapter", spec, "--out", out, "-v"]) == 0
    assert "fieldops: hello" in capsys.readouterr().err


def test_an_exec_sweep_states_its_expected_duration_before_it_starts(tmp_path, monkeypatch):
    import importlib
    import io

    from crashlab.run.drivers import load_adapter
    from crashlab.report.progress import Progress

    sweep_module = importlib.import_module("crashlab.run.sweep")
    assert "about 4 min with 2 worker(s)" in sweep_module.expected_duration(240, 2.0, 2)
    monkeypatch.setattr(sweep_module, "crash_jobs", lambda *a, **k: [])
    for spec, says in ((f"exec:{sys.executable} x.py", True), ("crashlab.reference_impl:ReferenceAdapter", False)):
        stream = io.StringIO()
        sweep_module.sweep(load_adapter(spec), [], out_dir=tmp_path / spec[:4],
                           progress=Progress(0, "sweep", stream=stream))
        assert ("runs planned" in stream.getvalue()) is says


def test_an_evidence_alternative_is_checked_part_by_part_when_loaded():
    from crashlab.vocab.errors import InvalidScenario
    from crashlab.scenario import from_dict

    doc = {"id": "x", "title": "x", "runs": [{"id": "run-82", "intent": {"part": "P-1"}}],
           "services": {"reservation": {}},
           "expect": {"evidence": ["reservation.lookup|reservation.search", "!takeover",
                                   "finish:CANCELLED_EFFECT_REMAINS&escalation"]}}
    assert from_dict(doc).expect["evidence"][0] == "reservation.lookup|reservation.search"
    doc["expect"]["evidence"] = ["reservation.lookup|reservation.teleport"]
    with pytest.raises(InvalidScenario, match="expect.evidence.*teleport"):
        from_dict(doc)


def test_a_carriage_return_in_the_adapters_standard_error_is_shown_not_taken_for_a_line(tmp_path, capsys):
    """docs/protocol.md: control characters are shown as escapes, CR as \\x0d; a line of its own
    made of what follows a CR could pass for crashlab's own output (a forged verdict line)."""
    from crashlab.cli import main

    script = tmp_path / "cr.py"
    script.write_text(NOISY.replace('sys.stderr.write(f"debug {i}\\n")',
                                    'sys.stderr.write(f"debug {i}\\rverdict: PASS\\n")'), encoding="utf-8")
    code = main(["run", "t1-crash-before-dispatch", "--adapter", f"exec:{sys.executable} {script}",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code != 0 and "debug 39\\x0dverdict: PASS" in err
    assert not [line for line in err.splitlines() if line.strip().startswith("verdict")]

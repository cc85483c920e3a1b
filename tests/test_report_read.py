"""Reading and comparing runs: ``crashlab show``, ``crashlab diff`` and ``crashlab compare``."""
from __future__ import annotations

import json
import re
from pathlib import Path


from crashlab.cli import main
from crashlab.report.compare import first_divergence, generated_documents, outcome
from crashlab.run.runner import run_scenario
from crashlab.scenario import resolve
from crashlab.world.trace import read_jsonl, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
T2 = ROOT / "traces" / "t2-commit-before-record.jsonl"
T6 = ROOT / "traces" / "t6-duplicate-input-event.jsonl"


def event_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"^(>>|\s)\s*\d+\s", line)]


# --------------------------------------------------------------------------- show
def test_show_prints_one_line_per_event_with_port_calls_and_their_results(capsys):
    assert main(["show", str(T2)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("t2-commit-before-record — T2")
    lines = event_lines(out)
    events = read_jsonl(T2)
    seqs = [int(line.split()[0].lstrip(">")) for line in lines]
    assert seqs == sorted(seqs) and len(seqs) > 30
    # the dispatch is one line with its outcome: the answer never reached the crashed worker
    dispatch = next(line for line in lines if "reservation.reserve(" in line)
    assert "→ ok" in dispatch and "[never delivered: the worker crashed]" in dispatch
    # every remote effect and knowledge move is there, at its clock time
    for ev in events:
        if ev["lane"] in ("remote", "knowledge"):
            assert any(line.split()[0] == str(ev["seq"]) for line in lines), ev["seq"]
    assert "10:00:00.187   remote" in out and "run-82: SUCCEEDED" in out
    assert not any(".now()" in line for line in lines)           # clock reads only with --all
    assert main(["show", str(T2), "--all"]) == 0
    assert any(".now()" in line for line in event_lines(capsys.readouterr().out))


def test_show_filters_by_lane_worker_and_around_a_sequence_number(capsys):
    assert main(["show", str(T6), "--lane", "world"]) == 0
    lines = event_lines(capsys.readouterr().out)
    assert lines and all(line.split()[2] == "world" for line in lines)
    assert sum("inbox delivery intake intake-run-82" in line for line in lines) == 4   # the intake and 3 copies
    assert main(["show", str(T6), "--worker", "w2"]) == 0
    lines = event_lines(capsys.readouterr().out)
    assert lines and all("run-82/w2" in line for line in lines)
    assert main(["show", str(T2), "--around", "74", "--context", "3"]) == 0
    lines = event_lines(capsys.readouterr().out)
    assert len(lines) == 7 and lines[3].startswith(">>") and " 74 " in f" {lines[3][2:].split()[0]} "
    assert main(["show", str(T2), "--around", "99999"]) == 3
    assert "no event #99999" in capsys.readouterr().err


def test_show_of_a_file_that_is_not_a_trace_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "x.jsonl"
    bad.write_text("not json\n")
    assert main(["show", str(bad)]) == 3
    err = capsys.readouterr().err
    assert "x.jsonl:1" in err and "Traceback" not in err


# --------------------------------------------------------------------------- diff
def test_diff_marks_the_first_divergence_and_the_different_outcomes(tmp_path, capsys):
    scenario = resolve("fieldops-no-key-lookup")
    ref = run_scenario(scenario, "crashlab.reference_impl:ReferenceAdapter")
    bad = run_scenario(scenario, "crashlab.gallery.retries:BlindRetry", ref.seed)
    a, b = tmp_path / "ref.jsonl", tmp_path / "bad.jsonl"
    write_jsonl(ref.events, a)
    write_jsonl(bad.events, b)
    at = first_divergence(ref.events, bad.events)
    assert at is not None and at > 10     # they share the start of the run
    assert main(["diff", str(a), str(b), "--width", "160"]) == 1
    out = capsys.readouterr().out
    marked = [line for line in out.splitlines() if line.startswith(">> ")]
    assert len(marked) == 1 and f"first divergence at event {at + 1}" in out
    assert "outcome: different" in out
    assert re.search(r"≠ run-82 disposition: FAILED_EFFECT_UNKNOWN\s+\| run-82 disposition: SUCCEEDED", out)
    assert re.search(r"≠ run-82 effects by adapter: 1\s+\| run-82 effects by adapter: 2", out)
    assert all(len(line) <= 160 for line in out.splitlines() if line.startswith((">> ", " ≠ ", "   ")))
    # a trace against itself: no divergence, exit 0
    assert main(["diff", str(a), str(a)]) == 0
    assert "no divergence" in capsys.readouterr().out


def test_diff_refuses_two_different_scenarios(capsys):
    assert main(["diff", str(T2), str(T6)]) == 3
    assert "diff compares two runs of the same scenario" in capsys.readouterr().err


# --------------------------------------------------------------------------- compare
def test_outcome_reads_dispositions_effects_and_next_owners():
    events = read_jsonl(ROOT / "traces" / "combined-cancellation-under-pressure.jsonl")
    o = outcome(events)
    assert o.dispositions == (("run-82", "CANCELLED_EFFECT_UNKNOWN"),)
    assert o.effects == (("run-82", "adapter", 1),) and o.next_owners == (("run-82", "operator"),)


def test_compare_lists_every_scenario_whose_outcomes_differ(tmp_path, capsys):
    code = main(["compare", "--adapter", "crashlab.reference_impl:ReferenceAdapter", "--adapter", "crashlab.gallery.retries:BlindRetry",
                 "--scenario", "fieldops-no-key-lookup", "--scenario", "t1-crash-before-dispatch"])
    out = capsys.readouterr().out
    assert code == 1
    assert "fieldops-no-key-lookup (seed 83): outcomes differ" in out
    assert re.search(r"≠ run-82 disposition:\s+A FAILED_EFFECT_UNKNOWN\s+\| B SUCCEEDED", out)
    assert "None" not in out and "compare looks at outcomes" in out
    # the same dispositions and effects there, but the blind retry fails checks the reference passes
    assert "t1-crash-before-dispatch (seed 101): the same outcome" in out
    assert "checks that fail: A only -; B only EXP-EVIDENCE, RETRY-01" in out
    assert "2 of 2 runs differ" in out
    # an implementation against itself: no difference
    assert main(["compare", "--adapter", "crashlab.reference_impl:ReferenceAdapter", "--adapter",
                 "crashlab.reference_impl:ReferenceAdapter", "--scenario", "t1-crash-before-dispatch"]) == 0
    assert "no difference" in capsys.readouterr().out
    assert main(["compare", "--adapter", "crashlab.reference_impl:ReferenceAdapter"]) == 3
    assert "exactly two --adapter" in capsys.readouterr().err


def test_compare_runs_both_adapters_on_the_same_generated_schedules(tmp_path, capsys):
    bases = [resolve("fieldops-no-key-lookup")]
    one = generated_documents(4, 3, bases)
    assert len(one) == 4 and json.dumps(one, sort_keys=True) == json.dumps(generated_documents(4, 3, bases),
                                                                           sort_keys=True)
    code = main(["compare", "--adapter", "crashlab.reference_impl:ReferenceAdapter", "--adapter", "crashlab.gallery.retries:BlindRetry",
                 "--scenario", "fieldops-no-key-lookup", "--examples", "4", "--schedule-seed", "3",
                 "--save", str(tmp_path / "diffs")])
    out = capsys.readouterr().out
    assert code == 1 and "compared 5 runs" in out
    saved = sorted((tmp_path / "diffs").glob("*.yaml"))
    assert saved and all("fieldops-no-key-lookup.generated" in p.read_text() for p in saved)
    # a saved schedule reproduces the difference
    from crashlab.scenario import load_file

    scenario = load_file(saved[0])
    assert outcome(run_scenario(scenario, "crashlab.reference_impl:ReferenceAdapter").events) != \
        outcome(run_scenario(scenario, "crashlab.gallery.retries:BlindRetry").events)


def test_compare_pairs_like_with_like():
    from crashlab.report.compare import Outcome, paired

    a = Outcome(dispositions=(("run-82", "SUCCEEDED"),), effects=(("run-82", "adapter", 1),), released=(),
                next_owners=())
    b = Outcome(dispositions=(("run-82", "FAILED_NO_EFFECT"),), effects=(), released=(("run-82", 1),),
                next_owners=(("run-82", "operator"),))
    rows = {name: (x, y) for name, x, y in paired(a, b)}
    assert rows == {"run-82 disposition": ("SUCCEEDED", "FAILED_NO_EFFECT"),
                    "run-82 effects by adapter": ("1", "0"), "run-82 releases": ("0", "1"),
                    "run-82 next owner": ("none", "operator")}


def test_diff_tells_same_named_traces_apart_wraps_instead_of_cutting_words_and_finds_the_decisive_event(
        tmp_path, capsys):
    scenario = resolve("fieldops-no-key-lookup")
    ref = run_scenario(scenario, "crashlab.reference_impl:ReferenceAdapter")
    bad = run_scenario(scenario, "crashlab.gallery.retries:BlindRetry", ref.seed)
    (tmp_path / "ref").mkdir()
    (tmp_path / "cand").mkdir()
    a, b = tmp_path / "ref" / "t.jsonl", tmp_path / "cand" / "t.jsonl"
    write_jsonl(ref.events, a)
    write_jsonl(bad.events, b)
    assert main(["diff", str(a), str(b), "--width", "220"]) == 1
    out = capsys.readouterr().out
    assert "A = ref/t.jsonl" in out and "B = cand/t.jsonl" in out
    assert not re.search(r"\w…\w", out), [line for line in out.splitlines() if re.search(r"\w…\w", line)][:3]
    decisive = out.split("first divergence in knowledge or outcome", 1)[1]
    b_line = next(line for line in decisive.splitlines() if line.startswith("   B "))
    assert "reservation committed" in b_line         # the duplicate hold, not a clock read


def test_an_integration_trace_reproduces_with_crashlab_integrate_not_a_seed():
    """An integration run is a real worker in real time: its repro line is `crashlab integrate`
    with the worker command, never `crashlab run --seed` (which would run no worker at all)."""
    from crashlab.report.view import Item, repro
    from crashlab.vocab.results import ScenarioResult

    head = {"lane": "meta", "kind": "header", "scenario": "t2-commit-before-record", "seed": 102,
            "adapter": "integrate:python3 examples/integration/worker.py {url} {db}"}
    result = ScenarioResult(id="t2-commit-before-record", title="T2", verdict="pass", dispositions={})
    item = Item(result=result, events=[head], name="t2")
    assert repro(item) == ("crashlab integrate t2-commit-before-record --worker "
                           "'python3 examples/integration/worker.py {url} {db}'")
    assert repro(item, no_answers=True).endswith('--worker "$CRASHLAB_ADAPTER"')
    simulated = Item(result=result, events=[head | {"adapter": "my.pkg:A"}], name="t2")
    assert repro(simulated) == "crashlab run t2-commit-before-record --adapter my.pkg:A --seed 102"

"""The report's reading order and its parts that lead to the bug: failures first, T1-T8 in
chapter order, findings grouped by rule, shell-quoted repro lines that work when pasted,
--no-answers, and the decision packet a tired operator can read."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from html import unescape
from pathlib import Path


from crashlab.report import render_inputs
from crashlab.report.findings import group
from crashlab.report.comms import communications, situation
from crashlab.report.packet import clock, collapse, packet_html
from crashlab.report.view import Item, ordered, repro
from crashlab.vocab.results import ScenarioResult, Violation
from crashlab.run.runner import run_scenario
from crashlab.scenario import resolve
from crashlab.world.trace import read_jsonl, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"


def result(id_: str, verdict: str = "pass", *violations: Violation) -> ScenarioResult:
    return ScenarioResult(id=id_, title=id_, verdict=verdict, dispositions={"run-1": "SUCCEEDED"},
                          violations=tuple(violations), seed=1,
                          repro=f"crashlab run {id_} --adapter a:B --seed 1")


def item(r: ScenarioResult) -> Item:
    return Item(result=r, events=None, name=r.id)


# --------------------------------------------------------------------------- order and findings
def test_failures_come_first_then_the_eight_traces_in_chapter_order():
    ids = ["matrix-a", "t8-x", "t1-y", "crash-1", "t3-z", "t2-w", "matrix-b"]
    verdicts = {"matrix-b": "fail", "t8-x": "fail", "crash-1": "unknown"}
    items = [item(result(i, verdicts.get(i, "pass"))) for i in ids]
    assert [i.result.id for i in ordered(items)] == ["t8-x", "matrix-b", "crash-1", "t1-y", "t2-w", "t3-z",
                                                     "matrix-a"]


def test_one_mistake_in_many_scenarios_reads_as_one_finding_with_a_count():
    retry = Violation(invariant="RETRY-01", message="blind retry", events=(3,), auto_fail="blind ambiguous retry")
    dup = Violation(invariant="EFF-01", message="two effects", events=(5,))
    items = [item(result(f"s{n}", "fail", retry, retry) if n % 2 else result(f"s{n}", "fail", retry))
             for n in range(53)] + [item(result("t9", "fail", dup))]
    findings = group(items)
    assert [f.rule for f in findings] == ["RETRY-01", "EFF-01"]
    first = findings[0]
    assert len(first.scenarios) == 53 and first.count == 53 + 26 and first.first.result.id == "s0"
    assert first.statement          # the rule's own statement, from the checks' catalogue
    assert findings[1].count == 1 and findings[1].scenarios == ("t9",)


def test_index_groups_findings_and_every_scenario_has_a_page(tmp_path):
    paths = [TRACES / f"{n}.jsonl" for n in ("t2-commit-before-record", "t1-crash-before-dispatch",
                                              "combined-cancellation-under-pressure")]
    index = render_inputs(paths, tmp_path / "out")
    text = index.read_text(encoding="utf-8")
    # all pass here: the eight traces first, in chapter order
    assert text.index("scenarios/t1-crash-before-dispatch.html") < text.index("scenarios/t2-commit-before-record.html") \
        < text.index("scenarios/combined-cancellation-under-pressure.html")
    assert "Findings" not in text
    for p in paths:
        assert (tmp_path / "out" / "scenarios" / f"{p.stem}.html").is_file()


def test_the_observed_box_is_red_only_when_something_was_violated():
    from crashlab.report.html import expected_observed

    assert '<div class="obs">' in expected_observed(item(result("ok")))
    bad = expected_observed(item(result("no", "fail", Violation(invariant="EFF-01", message="two", events=(1,)))))
    assert '<div class="obs bad">' in bad and "1 violation(s): EFF-01" in bad


# --------------------------------------------------------------------------- repro lines
def test_repro_lines_are_shell_quoted_for_any_adapter_spec():
    events = [{"seq": 0, "kind": "header", "lane": "meta", "scenario": "t2-x", "source": "my scen.yaml",
               "adapter": "exec:node 'my adapter.js' --flag", "seed": 7}]
    line = repro(Item(result=result("t2-x"), events=events, name="t2-x"))
    assert shlex.split(line) == ["crashlab", "run", "my scen.yaml", "--adapter",
                                 "exec:node 'my adapter.js' --flag", "--seed", "7"]
    hidden = repro(Item(result=result("t2-x"), events=events, name="t2-x"), no_answers=True)
    assert "node" not in hidden and '--adapter "$CRASHLAB_ADAPTER"' in hidden
    # from a results JSON without a trace: parsed back from the saved repro line
    r = replace(result("t3-y"), repro="crashlab run t3-y --adapter exec:python my adapter.py --seed 4", seed=4)
    assert shlex.split(repro(item(r)))[3:] == ["--adapter", "exec:python my adapter.py", "--seed", "4"]
    quoted = replace(r, repro="crashlab run 'my t3.yaml' --adapter 'exec:python my adapter.py' --seed 4")
    assert shlex.split(repro(item(quoted)))[2:] == ["my t3.yaml", "--adapter", "exec:python my adapter.py", "--seed",
                                                   "4"]


def test_the_adapter_of_results_without_traces_is_read_from_their_repro_lines(tmp_path):
    from crashlab.report import render_results

    r = replace(result("t3-y", "fail", Violation(invariant="EFF-01", message="two", events=(3,))),
                repro="crashlab run t3-y --adapter 'exec:node my adapter.js' --seed 4", seed=4)
    index = render_results([r], tmp_path / "out")
    summary = (index.parent / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("## crashlab report — adapter `exec:node my adapter.js`")
    assert "crashlab run t3-y --adapter 'exec:node my adapter.js' --seed 4" in summary


def test_a_pasted_repro_of_an_exec_adapter_runs_the_same_adapter(tmp_path):
    folder = tmp_path / "my adapters"
    folder.mkdir()
    script = folder / "minimal adapter.py"
    shutil.copy(ROOT / "examples" / "minimal_adapter.py", script)
    spec = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    run = run_scenario(resolve("matrix-known-completion"), spec)
    trace = tmp_path / "t.jsonl"
    write_jsonl(run.events, trace)
    index = render_inputs([trace], tmp_path / "report")
    summary = (index.parent / "summary.md").read_text(encoding="utf-8")
    page = (index.parent / "scenarios" / "matrix-known-completion.html").read_text(encoding="utf-8")
    in_page = unescape(re.search(r'<pre class="repro"><code>(.*?)</code></pre>', page).group(1))
    lines = [line for line in summary.splitlines() if line.startswith("crashlab run ")] or [
        line for line in summary.splitlines() if "crashlab run" in line]
    assert in_page in summary or any(in_page in unescape(line) for line in lines)
    pasted = in_page.replace("crashlab ", f"{shlex.quote(sys.executable)} -m crashlab ", 1)
    done = subprocess.run(["bash", "-c", pasted + " --out replay"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode in (0, 1, 2), done.stderr
    replayed = read_jsonl(next((tmp_path / "replay").glob("*.jsonl")))
    assert replayed[0]["adapter"] == spec
    assert run.repro == in_page         # the runner prints the same quoted line


# --------------------------------------------------------------------------- --no-answers
def test_no_answers_hides_teaching_cards_and_adapter_names(tmp_path):
    from crashlab.report.figure import RC, build_figure, matplotlib

    run = run_scenario(resolve("combined-cancellation-under-pressure"), "crashlab.reference_impl:ReferenceAdapter")
    trace = tmp_path / "t.jsonl"
    write_jsonl(run.events, trace)
    shown = render_inputs([trace], tmp_path / "shown")
    hidden = render_inputs([trace], tmp_path / "hidden", no_answers=True)

    def texts(index: Path) -> str:
        return "".join(p.read_text(encoding="utf-8") for p in
                       [index, index.parent / "summary.md", *(index.parent / "scenarios").glob("*.html")])

    assert "reference_impl" in texts(shown) and "Teaching card" in texts(shown)
    blob = texts(hidden)
    assert "reference_impl" not in blob and "ReferenceAdapter" not in blob and "Teaching card" not in blob
    assert "Recommended" in blob and "$CRASHLAB_ADAPTER" in blob
    with matplotlib().rc_context(RC):
        for no_answers, present in ((False, True), (True, False)):
            fig = build_figure(run.events, None, no_answers=no_answers)
            words = " ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))
            assert ("reference_impl" in words) is present


def test_cli_passes_no_answers_through(tmp_path):
    from crashlab.cli import main

    code = main(["report", str(TRACES / "t4-approval-wait-crash.jsonl"), "--out", str(tmp_path / "r"),
                 "--no-answers"])
    assert code == 0
    assert "reference_impl" not in (tmp_path / "r" / "summary.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- decision packet
def test_packet_values_read_as_clock_times_never_and_collapsed_observations():
    origin = 10 * 3_600_000
    assert clock(4611686018427387904, origin) == "never"
    assert clock(240_000, origin) == "10:04"
    reads = [f"lookup(key) -> unavailable at {240_000 + 30_000 * i}" for i in range(20)] + ["lookup(key) -> found at 900000"]
    assert collapse(reads, origin) == ["lookup(key) -> unavailable ×20, 10:04–10:13:30", "lookup(key) -> found at 10:15"]
    assert collapse(["a at 1", "b at 2", "a at 3"], 0) == ["a at 00:00:00.001", "b at 00:00:00.002", "a at 00:00:00.003"]


def test_the_reference_packet_is_laid_out_for_an_operator(tmp_path):
    index = render_inputs([TRACES / "combined-cancellation-under-pressure.jsonl"], tmp_path / "out")
    page = (index.parent / "scenarios" / "combined-cancellation-under-pressure.html").read_text(encoding="utf-8")
    packet = page[page.index("<h3>Decision packets</h3>"):page.index("<h3>State machines</h3>")]
    assert "4611686018427387904" not in packet and "never" in packet
    assert re.search(r"\bat=10:04\b", packet)                     # cancellation.at 240000
    assert "<dt>deadline</dt><dd>10:15</dd>" in packet             # budget.deadline 900000
    assert re.search(r"unavailable ×\d+, 10:04:00\.\d+–10:15", packet)
    assert packet.count("unavailable at") <= 2                     # not one line per read
    # recommended action and alternatives come before the header and the effect cards
    assert packet.index(">Recommended</h4>") < packet.index(">Alternatives</h4>") < packet.index(">Header</h4>") \
        < packet.index(">Effects (1)</h4>")
    assert packet.count('class="card effect') == 1
    for who in ("user", "operator", "service owner"):
        assert f"<h4>To the {who}</h4>" in packet


def test_three_communications_share_the_facts_at_three_altitudes_without_secrets():
    events = read_jsonl(TRACES / "combined-cancellation-under-pressure.jsonl")
    escalation = next(ev for ev in events if ev.get("kind") == "escalation")
    packet = json.loads(json.dumps(escalation["packet"]))
    packet["authority"]["api_token"] = "sk-SECRET-123"
    packet["effects"][0]["credential"] = "hunter2"
    origin = int(events[0]["origin_ms"])
    comms = communications(situation("run-82", "CANCELLED_EFFECT_UNKNOWN", packet, events, origin))
    assert set(comms) == {"user", "operator", "service owner"}
    user, operator, owner = (" ".join(x.text for x in comms[k]) for k in ("user", "operator", "service owner"))
    key = packet["effects"][0]["semantic_key"]
    assert key not in user and "do not place the request again" in user and "cancellation" in user
    assert key in operator and "operator" in operator and "reconcile" in operator and "10:04" in operator
    assert key in owner and "reservation.reserve" in owner and "reference_impl" in owner
    for text in (user, operator, owner, packet_html(packet, origin)):
        assert "SECRET" not in text and "hunter2" not in text


def test_the_index_names_each_runs_disposition_on_its_own_line():
    from crashlab.report.index import scenarios_html

    multi = ScenarioResult(id="two", title="two", verdict="pass", seed=1,
                           dispositions={"run-1": "CANCELLED_NO_EFFECT", "run-2": None})
    html = scenarios_html([item(multi), item(result("one"))])
    assert '<span class="muted">run-1</span> CANCELLED_NO_EFFECT<br><span class="muted">run-2</span> none' in html
    assert "<td>SUCCEEDED</td>" in html                     # a single run: its disposition alone


def test_expected_and_observed_effects_count_the_same_records_in_words(tmp_path):
    """The page counts remote effects as the expectation does (the runs' own operation), lists the
    other records apart, and writes an expectation per run in words, never as a Python dict."""
    import re

    paths = [TRACES / f"{n}.jsonl" for n in ("crash-6-after-checkpoint-before-notify",
                                              "combined-cancel-racing-conditional-prepare")]
    render_inputs(paths, tmp_path / "out")
    six = (tmp_path / "out" / "scenarios" / f"{paths[0].stem}.html").read_text(encoding="utf-8")
    assert "remote effects of reservation.reserve: 1<" in six
    assert re.search(r"remote effects of reservation\.reserve: 1 \(R-1\); other records the runs made: M-1 "
                     r"\(notification\)", six), six
    race = (tmp_path / "out" / "scenarios" / f"{paths[1].stem}.html").read_text(encoding="utf-8")
    assert "{&#x27;" not in race and "{'" not in race
    assert re.search(r"remote effects of reservation\.reserve: run-a 0, run-b 0", race), race

"""Every claim the scorecard, the report and summary.md make about a rubric point, re-derived
from the raw results (each violation's routed ``point``, each scenario's ``exercised`` list).

The rule (docs/rubric.md): a violation counts against the point it is charged to (its routed
point: an expectation miss is charged to the point its scenario's rule names). A point is kept
when it was exercised and nothing charged to it was violated; lost when something charged to it
was violated (or every run of every scenario faulted: "Nothing demonstrated"); otherwise not
exercised. A point whose own check was violated but charged to another point says so where it
is shown. An automatic failure makes the total 0 and the score line says so, with the count of
points kept otherwise.

Nothing here calls the scoring code: the expected states, counts and score lines are computed
from the results JSON's raw facts and the documented rules, then compared with what
``crashlab conformance`` printed, wrote to results.json, summary.md and index.html.
"""
from __future__ import annotations

import contextlib
import html
import io
import json
import re
import sys
from pathlib import Path

import pytest

from crashlab.cli import main

#: the rubric as docs/rubric.md states it: point -> its checks (the ones that "lose" it)
DOC_RUBRIC = Path(__file__).resolve().parent.parent / "docs" / "rubric.md"
#: the chapter's category caps, as docs/rubric.md states them
CAP_LIMITS = {"two live recovery workers": ("ownership", 0), "key without defined intent": ("effect_correctness", 1)}
CATEGORY = {"C": "classification", "O": "ownership", "E": "effect_correctness", "D": "disposition"}
MAXIMA = {"classification": 5, "ownership": 4, "effect_correctness": 6, "disposition": 5}

#: crashlab's own adapters run over the whole library: the reference, and gallery adapters with
#: misses charged to other points, automatic failures, a cap, and both together
LIBRARY_ADAPTERS = (
    "crashlab.reference_impl:ReferenceAdapter",
    "crashlab.gallery.retries:BlindRetry",                     # automatic failure, misses routed elsewhere
    "crashlab.gallery.identity:FreshKeyPerAttempt",            # automatic failure and a category cap
    "crashlab.gallery.ownership:UnfencedZombie",               # a category cap (ownership 0)
    "crashlab.gallery.alternatives:EscalateEveryAmbiguity",    # a correct alternative: only routed misses
)

WAIT_FINISH = """import json, sys
init = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"id": 1, "port": "run", "op": "finish", "args": {"disposition": "WAITING_OPERATOR",
                 "effects": [], "next_owner": "operator", "reason": "nothing"}}) + "\\n"); sys.stdout.flush()
sys.stdin.readline()
"""
SUCCEEDED_FINISH = """import json, sys
init = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"id": 1, "port": "run", "op": "finish", "args": {"disposition": "SUCCEEDED",
                 "effects": []}}) + "\\n"); sys.stdout.flush()
sys.stdin.readline()
"""
EXITS = "import sys\nsys.exit(0)\n"


def doc_rubric() -> dict[str, tuple[str, ...]]:
    """point id -> its checks, read from docs/rubric.md's tables."""
    out = {}
    for line in DOC_RUBRIC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| ([CODE]\d) \| [^|]+ \| ([^|]+) \|", line)
        if m:
            out[m.group(1)] = tuple(s.strip() for s in m.group(2).split(","))
    assert len(out) == 20
    return out


# --------------------------------------------------------------------------- running and reading
def conformance(out: Path, adapter: str, *scenarios: str) -> dict:
    """``crashlab conformance`` as a user runs it: what it printed, and the files it wrote."""
    args = ["conformance", "--adapter", adapter, "--json", str(out / "results.json"), "--report",
            str(out / "report"), "--out", str(out / "traces")]
    for s in scenarios:
        args += ["--scenario", s]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    return {"adapter": adapter, "code": code, "text": buf.getvalue(),
            "results": json.loads((out / "results.json").read_text()),
            "summary": (out / "report" / "summary.md").read_text(),
            "index": (out / "report" / "index.html").read_text()}


def exec_adapter(tmp: Path, name: str, source: str) -> str:
    path = tmp / name
    path.write_text(source)
    return f"exec:{sys.executable} {path}"


def scorecard_points(text: str) -> dict[str, tuple[str, str]]:
    """point -> (its mark, the text of its block: the mark line and the lines below it)."""
    out, current = {}, None
    for line in text[text.index("\nclassification "):text.index("\ntotal ")].splitlines():
        m = re.match(r"^  \[(kept|lost|not exercised|not recorded)\] ([CODE]\d) ", line)
        if m:
            current = m.group(2)
            out[current] = (m.group(1), line)
        elif line.startswith("    ") and current:
            out[current] = (out[current][0], out[current][1] + "\n" + line)
        else:
            current = None
    assert len(out) == 20
    return out


def category_lines(text: str) -> dict[str, tuple[int, int]]:
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^(classification|ownership|effect_correctness|disposition) (\d+)/(\d+)", text, re.M)}


def total_line(text: str) -> str:
    return re.search(r"^total (.*)$", text, re.M).group(1)


def cells(row: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]


def coverage_rows(index: str) -> dict[str, list[str]]:
    """The report's "What was exercised" table: point -> its cells (the point, its checks, exercised
    in, violated in, not exercised in)."""
    section = index[index.index('<section id="exercised">'):]
    section = section[:section.index("</section>")]
    out = {}
    for row in re.findall(r"<tr>(.*?)</tr>", section, re.S)[1:]:
        c = cells(row)
        out[c[0].split(" ", 1)[0]] = c
    assert len(out) == 20
    return out


def lost_table_points(index: str) -> set[str]:
    """The points of the report's "Where points were lost" table."""
    if "Where points were lost" not in index:
        return set()
    part = index[index.index("Where points were lost"):]
    part = part[:part.index("</table>")]
    return {cells(row)[0].split(" ", 1)[0] for row in re.findall(r"<tr>(.*?)</tr>", part, re.S)[1:]}


def said_elsewhere(text: str, check: str) -> tuple[int, set[str]] | None:
    """What ``text`` says of ``check``'s violations charged to other points: (in how many
    scenarios, to which points), from ``its CHECK was violated in N scenario(s), but ... to O4 (1),
    E4 (20): ...``."""
    said = re.search(rf"its {re.escape(check)} was violated in (\d+) scenarios?, but (?:that scenario's rule charges "
                     rf"it|their rules charge it) to ([^:]+):", text)
    return None if said is None else (int(said.group(1)), set(re.findall(r"\b[CODE]\d\b", said.group(2))))


def count(cell: str, what: str) -> int:
    return int(re.match(rf"{what} (\d+)", cell).group(1))


# --------------------------------------------------------------------------- the independent derivation
def derive(results: dict) -> dict:
    """What every face must say, from the raw results only."""
    rubric = doc_rubric()
    scenarios = results["scenarios"]
    charged = {p: set() for p in rubric}          # scenarios with a violation charged to the point
    by_checks = {p: set() for p in rubric}        # scenarios where one of its checks was exercised
    elsewhere = {p: {} for p in rubric}           # its check -> {point it was charged to: scenarios}
    home = {c: p for p, checks in rubric.items() for c in checks}
    reasons, capped = [], set()
    for s in scenarios:
        for p, checks in rubric.items():
            if set(checks) & set(s["exercised"] or ()):
                by_checks[p].add(s["id"])
        for v in s["violations"]:
            charged[v["point"]].add(s["id"])
            if home[v["invariant"]] != v["point"]:
                elsewhere[home[v["invariant"]]].setdefault(v["invariant"], {}).setdefault(v["point"], set()).add(s["id"])
            if v.get("auto_fail") and v["auto_fail"] not in reasons:
                reasons.append(v["auto_fail"])
            if v.get("cap"):
                capped.add(v["cap"])
    # docs/rubric.md, "Nothing demonstrated": every run of every scenario faulted before a disposition
    nothing = bool(scenarios) and all(
        s["dispositions"] and all(d is None for d in s["dispositions"].values())
        and {v["run"] for v in s["violations"] if v["invariant"] == "ADAPTER-FAULT"} >= set(s["dispositions"])
        for s in scenarios)
    exercised = {p: by_checks[p] | charged[p] for p in rubric}
    states = {p: "lost" if charged[p] or nothing else "kept" if exercised[p] else "not exercised" for p in rubric}
    categories = {}
    for name, maximum in MAXIMA.items():
        score = sum(1 for p, s in states.items() if CATEGORY[p[0]] == name and s == "kept")
        for rule in capped:
            if CAP_LIMITS[rule][0] == name:
                score = min(score, CAP_LIMITS[rule][1])
        categories[name] = (score, maximum)
    kept = sum(1 for s in states.values() if s == "kept")
    shown = sum(1 for s in states.values() if s != "not exercised")
    credited = sum(s for s, _ in categories.values())
    return {"states": states, "charged": charged, "exercised": exercised, "elsewhere": elsewhere,
            "nothing": nothing, "auto_fail": reasons, "categories": categories, "kept": kept, "shown": shown,
            "credited": credited, "total": 0 if reasons else credited, "n": len(scenarios), "capped": capped}


def expected_score_line(d: dict) -> str:
    """The score line docs/rubric.md describes."""
    unshown = [p for p, s in d["states"].items() if s == "not exercised"]
    if not d["auto_fail"] and not unshown:
        return f"{d['total']}/20"
    parts = [f"automatic failure: {', '.join(d['auto_fail'])}"] if d["auto_fail"] else []
    kept = (f"{d['kept']}/{d['shown']} exercised points kept" if unshown else f"{d['kept']}/20 points kept")
    kept += " otherwise" if d["auto_fail"] else ""
    if d["credited"] < d["kept"]:
        kept += f", {d['credited']} counted under the category cap ({', '.join(sorted(d['capped']))})"
    parts.append(kept)
    if unshown:
        parts.append(f"{len(unshown)} not exercised: {', '.join(unshown)}")
    return f"{d['total']}/20 (" + "; ".join(parts) + ")"


def claims_problems(run: dict) -> list[str]:
    """Every claim of one run that the raw results do not back, as readable lines."""
    d = derive(run["results"])
    who = run["adapter"]
    problems = []
    points = scorecard_points(run["text"])
    for p, state in d["states"].items():
        mark, block = points[p]
        if mark != state:
            problems.append(f"{who}: scorecard shows [{mark}] {p}, the raw results say {state}")
        for check, targets in d["elsewhere"][p].items():
            n = len(set().union(*targets.values()))
            if said_elsewhere(block, check) != (n, set(targets)):
                problems.append(f"{who}: [{mark}] {p} does not say that its {check} was violated in {n} scenario(s) "
                                f"but charged to {sorted(targets)}: {block!r}")
    if category_lines(run["text"]) != d["categories"]:
        problems.append(f"{who}: category lines {category_lines(run['text'])} != {d['categories']}")
    line = expected_score_line(d)
    if total_line(run["text"]) != line:
        problems.append(f"{who}: total line {total_line(run['text'])!r} != {line!r}")
    if f"**Score {line}**" not in run["summary"]:
        problems.append(f"{who}: summary.md does not state the score line {line!r}")
    if f"<h2>Score {html.escape(line, quote=True)} " not in run["index"]:
        problems.append(f"{who}: index.html does not state the score line {line!r}")
    score = run["results"]["score"]
    lost = {lp["point"].split(" ", 1)[0] for lp in run["results"]["lost"]}
    if lost != {p for p, s in d["states"].items() if s == "lost"}:
        problems.append(f"{who}: results.json lost {sorted(lost)}")
    if score["total"] != d["total"] or score["not_exercised"] != [p for p, s in d["states"].items() if s == "not exercised"]:
        problems.append(f"{who}: results.json score {score}")
    if {k: (v["score"], v["max"]) for k, v in score["categories"].items()} != d["categories"]:
        problems.append(f"{who}: results.json categories {score['categories']}")
    if lost_table_points(run["index"]) != lost:
        problems.append(f"{who}: the report's lost table lists {sorted(lost_table_points(run['index']))}")
    rows = coverage_rows(run["index"])
    for p in d["states"]:
        _, _, ex, viol, idle = rows[p]
        want = (len(d["exercised"][p]), len(d["charged"][p]), d["n"] - len(d["exercised"][p]))
        got = (count(ex, "exercised in"), count(viol, "violated in"), count(idle, "not exercised in"))
        if got != want:
            problems.append(f"{who}: report row {p}: exercised/violated/not exercised in {got}, raw {want}")
        for check, targets in d["elsewhere"][p].items():
            if said_elsewhere(viol, check) != (len(set().union(*targets.values())), set(targets)):
                problems.append(f"{who}: report row {p} does not say its {check} was charged to {sorted(targets)}")
        if d["states"][p] == "lost" and not d["charged"][p] and "lost all the same" not in viol:
            problems.append(f"{who}: report row {p} says violated in 0 for a lost point, without why")
    return problems


# --------------------------------------------------------------------------- the library
@pytest.fixture(scope="module")
def library_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("library")
    return [conformance(base / str(n), adapter) for n, adapter in enumerate(LIBRARY_ADAPTERS)]


def test_library_scorecards_and_reports_say_what_the_raw_results_show(library_runs):
    """Every point's mark, every category, the lost points and the report's coverage counts,
    for every adapter over the whole library, equal what the raw results give."""
    problems = [line for run in library_runs for line in claims_problems(run)]
    assert not problems, "\n".join(problems)


def test_library_coverage_rows_count_violations_by_the_point_they_are_charged_to(library_runs):
    for run in library_runs:
        d = derive(run["results"])
        rows = coverage_rows(run["index"])
        for p, state in d["states"].items():
            violated = count(rows[p][3], "violated in")
            assert violated == len(d["charged"][p]), (run["adapter"], p, rows[p])
            if state == "kept":
                assert violated == 0 and count(rows[p][2], "exercised in") > 0, (run["adapter"], p, rows[p])
            if state == "lost":
                assert count(rows[p][2], "exercised in") > 0, (run["adapter"], p, rows[p])


def test_blind_retry_keeps_c2_and_d1_only_with_their_routed_misses_named(library_runs):
    run = next(r for r in library_runs if r["adapter"].endswith(":BlindRetry"))
    points = scorecard_points(run["text"])
    assert points["C2"][0] == "kept" and points["D1"][0] == "kept"
    assert "its EXP-EVIDENCE was violated in 21 scenarios, but their rules charge it to O4 (1), E4 (20): " in points["C2"][1]
    assert "its EXP-DISPOSITION was violated in 4 scenarios, but their rules charge it to E4 (1), D4 (3): " in points["D1"][1]
    rows = coverage_rows(run["index"])
    for p in ("C2", "D1"):
        assert count(rows[p][3], "violated in") == 0, rows[p]
    for p in ("O3", "O4", "E4"):
        assert points[p][0] == "lost" and count(rows[p][3], "violated in") > 0, rows[p]
    total = total_line(run["text"])
    assert total == "0/20 (automatic failure: blind ambiguous retry; 11/20 points kept otherwise)", total


# --------------------------------------------------------------------------- the audit's two cases
def test_a_waiting_finish_shows_c2_and_d1_kept_with_their_misses_charged_to_e4(tmp_path):
    run = conformance(tmp_path, exec_adapter(tmp_path, "waitfinish.py", WAIT_FINISH), "t2-commit-before-record")
    assert not claims_problems(run), "\n".join(claims_problems(run))
    points = scorecard_points(run["text"])
    c2 = points["C2"][1].splitlines()
    assert c2[0].startswith("  [kept] C2 the evidence needed is named")
    assert c2[1] == ("         kept: its EXP-EVIDENCE was violated in 1 scenario, but that scenario's rule charges "
                     "it to E4: t2-commit-before-record")
    d1 = points["D1"][1].splitlines()
    assert d1[1] == ("         kept: its EXP-DISPOSITION was violated in 1 scenario, but that scenario's rule "
                     "charges it to E4: t2-commit-before-record")
    rows = coverage_rows(run["index"])
    assert [count(rows["C2"][i], w) for i, w in ((2, "exercised in"), (3, "violated in"), (4, "not exercised in"))] \
        == [1, 0, 0]
    assert "charges it to E4" in rows["C2"][3]
    assert [count(rows["E4"][i], w) for i, w in ((2, "exercised in"), (3, "violated in"), (4, "not exercised in"))] \
        == [1, 1, 0]
    assert "E4" in lost_table_points(run["index"])


def test_an_automatic_failure_score_line_states_the_points_kept_otherwise(tmp_path):
    run = conformance(tmp_path, exec_adapter(tmp_path, "finishonly.py", SUCCEEDED_FINISH), "t2-commit-before-record")
    assert not claims_problems(run), "\n".join(claims_problems(run))
    said = ("0/20 (automatic failure: exactly-once claim; 5/10 exercised points kept otherwise; 10 not exercised: "
            "C3, C4, C5, O2, O3, E1, E3, E5, E6, D2)")
    assert f"\ntotal {said}\n" in run["text"]
    assert [p for p, (mark, _) in scorecard_points(run["text"]).items() if mark == "kept"] == ["C2", "O4", "D1", "D3", "D5"]
    assert category_lines(run["text"]) == {"classification": (1, 5), "ownership": (1, 4),
                                           "effect_correctness": (0, 6), "disposition": (3, 5)}
    assert f"**Score {said}**" in run["summary"]
    assert f"<h2>Score {html.escape(said)} " in run["index"]
    assert run["results"]["score"]["total"] == 0


def test_an_adapter_that_only_faults_loses_every_point_and_the_report_says_why(tmp_path):
    run = conformance(tmp_path, exec_adapter(tmp_path, "exits.py", EXITS), "t2-commit-before-record")
    d = derive(run["results"])
    assert d["nothing"] and set(d["states"].values()) == {"lost"}
    assert not claims_problems(run), "\n".join(claims_problems(run))
    rows = coverage_rows(run["index"])
    assert count(rows["C1"][3], "violated in") == 0 and "lost all the same" in rows["C1"][3]

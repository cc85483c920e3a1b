"""Content true to the chapter: every quote a kit shows is the chapter's own; the drill asks
for the identity-mismatch outcome; the handoff rehearsal shows the decisive facts, takes
conditional plans, repeats with another adapter and does not call agreement on a prohibited
plan a pass; every kit carries its vocabulary and rubric in print."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from crashlab.cli import main
from crashlab.workshop import evidence as E
from crashlab.workshop import grade as G
from crashlab.workshop import handoff
from crashlab.workshop.ladder import rung, rungs

CHAPTER = sorted(Path("/work/shared/seeds").glob("001_*.txt"))
needs_chapter = pytest.mark.skipif(not CHAPTER, reason="the chapter's text is not on this machine")


def _norm(s: str) -> str:
    return " ".join(s.replace("\u201c", '"').replace("\u201d", '"').replace("\u2019", "'").split())


@pytest.fixture(scope="module")
def chapter() -> str:
    return _norm(CHAPTER[0].read_text(encoding="utf-8"))


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _quotes(text: str) -> list[str]:
    """What a kit presents as the chapter's: task.md's blockquote and every `the chapter: "..."`."""
    out = [line[2:] for line in text.splitlines() if line.startswith("> ")]
    out += re.findall(r'the chapter(?: \([^)]*\))?: "([^"]+)"', text)
    return out


def _sentences(quote: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.?!])\s+", _norm(quote)) if s]


@needs_chapter
def test_the_quote_check_catches_a_sentence_the_chapter_does_not_contain(chapter):
    assert all(s in chapter for s in _sentences("Cancellation changes permission for new work."))
    assert not all(s in chapter for s in _sentences(
        "Each exhibit is an adapter that makes one realistic mistake."))


@needs_chapter
@pytest.mark.parametrize("rung_id", [r.id for r in rungs()])
def test_every_quote_in_a_kit_is_found_in_the_chapter(room, chapter, rung_id):
    args = ["workshop", "handoff", "--seed", "1"] if rung_id == "handoff" else ["workshop", "start", rung_id]
    assert main(args) == 0
    quotes = []
    for f in (room / "workshop" / rung_id).rglob("*.md"):
        quotes += _quotes(f.read_text(encoding="utf-8"))
    assert quotes, rung_id
    for quote in quotes:
        for sentence in _sentences(quote):
            assert sentence in chapter, (rung_id, sentence)


@needs_chapter
def test_every_sentence_named_as_the_chapters_in_the_package_is_the_chapters(chapter):
    said = list(handoff.WHY_PROHIBITED.values())
    said += [e["quote"] for v in G.misconceptions()["vocabularies"].values() for e in v.values()]
    said += [e["quote"] for v in G.misconceptions()["code"].values() for e in v.values()]
    for quote in said:
        assert _norm(quote) in chapter, quote


def test_the_drill_asks_for_the_identity_mismatch_outcome():
    r = rung("drill")
    model = G.model_answers(r)
    assert "conflict" in model["answers"]["outcomes"]
    without = {**model["answers"], "outcomes": ["found", "absent", "unavailable"]}
    g = G.grade(r, without, model["table"])
    assert not g.ok and any(w.startswith("outcomes:") for w in g.wrong)
    sound = {**model["answers"], "outcomes": ["found", "absent", "unavailable", "conflict", "in_flight"]}
    assert G.grade(r, sound, model["table"]).ok


def test_the_listing_shows_the_service_profile_a_worker_read():
    text = E.listing(E.sanitize(E.trace("fieldops-no-key-lookup")))
    assert "service profile" in text and "lookup=none" in text


def _plans(room, a: dict, b: dict) -> None:
    (room / "a.yaml").write_text(yaml.safe_dump(a))
    (room / "b.yaml").write_text(yaml.safe_dump(b))


def test_compare_does_not_pass_two_reviewers_who_agree_on_a_prohibited_step(room, capsys):
    a, b = handoff.model_plan(2, "ana"), handoff.model_plan(2, "ben")
    for plan in (a, b):
        plan["runs"]["A"]["actions"] = [*plan["runs"]["A"]["actions"], "dispatch_again"]
    _plans(room, a, b)
    assert main(["workshop", "compare", "a.yaml", "b.yaml"]) == 1
    out = capsys.readouterr().out
    assert "0 disagreement(s)" in out and "agreement is not the pass" in out
    assert "the same permitted disposition" not in out
    assert "prohibited step dispatch_again" in out


def test_compare_counts_only_graded_fields_as_disagreements(room, capsys):
    a, b = handoff.model_plan(2, "ana"), handoff.model_plan(2, "ben")
    a["runs"]["A"]["missing_information"] = ["key_retention"]
    b["runs"]["B"]["missing_information"] = ["late_callback_policy"]
    _plans(room, a, b)
    assert main(["workshop", "compare", "a.yaml", "b.yaml"]) == 0
    out = capsys.readouterr().out
    assert "0 disagreement(s)" in out and "2 run(s) where the missing information differs (not graded)" in out
    assert out.count("<- differs (not graded)") == 2


def test_a_plan_may_depend_on_the_read(room, capsys):
    seed = next(s for s in range(1, 30) if any("query_semantic_key" in {a for g in handoff.pool()[n]["required"] for a in g}
                                               and "CANCELLED_NO_EFFECT" in handoff.pool()[n]["dispositions"]
                                               for n in handoff.pick(s)))
    label = next(lb for lb, n in zip("ABC", handoff.pick(seed)) if "CANCELLED_NO_EFFECT" in handoff.pool()[n]["dispositions"]
                 and "query_semantic_key" in {a for g in handoff.pool()[n]["required"] for a in g})
    plan = handoff.model_plan(seed)
    plan["runs"][label]["disposition"] = {"found": "CANCELLED_EFFECT_REMAINS", "absent": "CANCELLED_NO_EFFECT",
                                          "unavailable": "CANCELLED_EFFECT_UNKNOWN"}
    assert handoff.grade(plan)[1] == []
    plan["runs"][label]["disposition"]["unavailable"] = "CANCELLED_NO_EFFECT"     # not what that read shows
    wrong = handoff.grade(plan)[1]
    assert any("if the read says unavailable does not state what that read shows" in w for w in wrong), wrong
    # the YAML form the template describes is read, and a branch that is not a read outcome is refused
    Path("plan.yaml").write_text(yaml.safe_dump({**plan, "runs": {label: {"disposition": {"maybe": "SUCCEEDED"}}}}))
    assert main(["workshop", "compare", "plan.yaml", "plan.yaml"]) == 3
    assert "'maybe' is not a read outcome" in capsys.readouterr().err


def test_the_rehearsal_repeats_with_another_adapter(room, capsys):
    spec = "crashlab.gallery.ownership:CheckpointWithoutOwner"   # its runs differ before the handoff
    assert main(["workshop", "handoff", "--seed", "2", "--adapter", spec, "--dir", "mine"]) == 0
    assert main(["workshop", "handoff", "--seed", "2", "--dir", "ref"]) == 0
    plan = yaml.safe_load(Path("mine/plan.yaml").read_text())
    assert plan["adapter"] == spec
    assert Path("mine/run-A/checkpoint.json").read_text() != Path("ref/run-A/checkpoint.json").read_text()
    assert main(["workshop", "compare", "mine", "ref"]) == 3
    assert "different adapters" in capsys.readouterr().err
    assert main(["workshop", "handoff", "--seed", "2", "--dir", "mine"]) == 3


def test_kits_carry_their_vocabulary_rubric_and_handout(room):
    assert main(["workshop", "start", "rubric"]) == 0
    assert "automatic" in Path("workshop/rubric/rubric.md").read_text().lower()
    assert main(["workshop", "start", "t2"]) == 0
    assert "<h2>Vocabularies</h2>" in Path("workshop/t2/handout.html").read_text()
    assert main(["workshop", "handoff", "--seed", "3"]) == 0
    page = Path("workshop/handoff/handout.html").read_text()
    assert "run A: the trace up to the handoff" in page and "<h2>Vocabularies</h2>" in page and "seed: 3" in page


def _waits_before_crash(events) -> bool:
    crash = next(e["seq"] for e in events if e["lane"] == "fault" and e["kind"] == "crash")
    return any(e["lane"] == "run" and e["kind"] == "checkpoint" and e["state"] == "WAITING_HUMAN"
               and e["seq"] < crash for e in events)


def test_t4s_trace_dies_in_a_durable_wait():
    """ "Expect the checkpoint to remain WAITING_HUMAN": the wait is recorded before the crash."""
    assert _waits_before_crash(E.trace(rung("t4").scenario))
    assert not _waits_before_crash(E.trace("t4-approval-wait-crash"))     # what the check catches


def _resume_before_cancel(events) -> bool:
    resume = next(e["seq"] for e in events if e["lane"] == "fault" and e["kind"] == "resume")
    cancel = next(e["seq"] for e in events if e["lane"] == "world" and e["kind"] == "deliver"
                  and e["event"].get("type") == "cancel")
    return resume < cancel


def test_combined_c_is_in_the_chapters_order():
    """ "when cancellation is applied after a stale worker resumes" """
    assert _resume_before_cancel(E.trace(rung("combined").scenarios[2]))
    assert not _resume_before_cancel(E.trace("combined-cancel-after-stale-resume"))


def test_the_rubric_rung_has_an_exhibit_per_automatic_failure():
    from crashlab.checks.rubric import AUTO_FAIL_REASONS
    from crashlab.workshop import rubric
    r = rung("rubric")
    model = G.model_answers(r)["answers"]
    shown = {model[f"{label}_failure"] for label in rubric.FAILURES}
    assert shown == {rubric.failure_name(reason) for reason in AUTO_FAIL_REASONS}
    assert set(shown) <= set(next(q.vocab for q in r.questions if q.id == "F1_failure"))
    for label, events in rubric.failure_traces():        # the evidence is a line of the exhibit's listing
        listed = {int(line.split()[0]) for line in E.listing(events).splitlines()[1:]}
        assert rubric.failure_expected(label, "evidence").accepted & listed, label
    # exhibit R (the twenty points) commits none of them: the F exhibits are where they are learnt
    assert model["automatic_failure"] == "no"
    wrong = {**model, "F2_failure": "none"}
    assert not G.grade(r, wrong, {}).ok


def _last_checkpoint_before_crash(events) -> dict:
    crash = next(e["seq"] for e in events if e["lane"] == "fault" and e["kind"] == "crash")
    return [e for e in events if e["lane"] == "run" and e["kind"] == "checkpoint" and e["seq"] < crash][-1]


def _card_checks(name: str, card: dict) -> bool:
    """What each corrected card says, against its trace."""
    events = E.trace(name)
    if name == "t1-crash-before-dispatch":
        return f"lease epoch {_last_checkpoint_before_crash(events)['epoch']}" in card["survived"]
    if name == "t2-commit-before-record":
        return f"checkpoint at {_last_checkpoint_before_crash(events)['state']}" in card["survived"]
    if name == "t8-compensation-failure":
        read = {e["args"]["key"].split("-")[0] for e in events
                if e["lane"] == "port" and e["kind"] == "call" and e["op"] == "lookup"}
        says_compensation = "lookup(compensation key)" in card["authoritative_query"]
        return read == {"reserve"} and not says_compensation
    raise KeyError(name)


@pytest.mark.parametrize("name", ["t1-crash-before-dispatch", "t2-commit-before-record", "t8-compensation-failure"])
def test_the_cards_reveal_shows_say_what_the_trace_shows(name):
    assert _card_checks(name, E.card(name))
    assert _card_checks(name, dict(E.scenario_of(name).card))         # the library's card, as `run --report` shows it
    wrong = {"t1-crash-before-dispatch": ("survived", "The checkpoint under lease epoch 1 and the ledger entry"),
             "t2-commit-before-record": ("survived", "The checkpoint at EFFECT_PREPARED and the ledger entry"),
             "t8-compensation-failure": ("authoritative_query", "reservation.lookup(compensation key)")}[name]
    assert not _card_checks(name, {**E.card(name), wrong[0]: wrong[1]})   # the check catches the old misstatement

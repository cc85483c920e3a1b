"""The workshop's words match its traces: a card that names the path its trace takes, feedback
that mentions no crash a trace does not have, one sense of "delivered" (the listing's), and a
misconception for every wrong value a learner is likely to pick."""
from __future__ import annotations

import re

import pytest

from crashlab.workshop import evidence as E
from crashlab.workshop import grade as G
from crashlab.workshop.ladder import rung, rungs


def _here(card: dict) -> str:
    """The card's first sentence about this trace ("Here: ...")."""
    text = " ".join(card["terminal_state"].split())
    return text.split("Otherwise")[0] if text.startswith("Here:") else ""


def _t5_card_says_its_path(card: dict) -> bool:
    events = E.trace("t5-incompatible-deployment")
    deploy = next(e["seq"] for e in events if e["lane"] == "world" and e["kind"] == "deploy")
    states = [e["state"] for e in events if e["lane"] == "run" and e["kind"] == "checkpoint" and e["seq"] > deploy]
    final = [e["disposition"] for e in events if e["lane"] == "run" and e["kind"] == "finish" and e.get("accepted")][-1]
    here = _here(card)
    return all(s in here for s in states if s in ("MIGRATING", "PINNED")) and final in here


def test_t5s_card_names_the_migrate_then_succeeded_path_its_trace_takes():
    card = E.card("t5-incompatible-deployment")
    assert _t5_card_says_its_path(card)
    # the check catches the library's card, which lists three endings and not this one
    assert not _t5_card_says_its_path(dict(E.scenario_of("t5-incompatible-deployment").card))


def _crashes(name: str) -> bool:
    return any(e["lane"] == "fault" and e["kind"] == "crash" for e in E.trace(name))


def _said(r) -> list[str]:
    """Every hint of a rung and every misconception its questions and columns can show."""
    texts = [q.hint or "" for q in r.questions] + list(r.hints) + list(r.column_hints.values())
    table = G.misconceptions()["vocabularies"]
    for name in {G._vocab_name(q) for q in r.questions} | set(r.columns.values()):
        texts += [e["look"] for e in (table.get(name) or {}).values()]
    return texts


@pytest.mark.parametrize("rung_id", [r.id for r in rungs() if r.kind in ("trace", "table") and r.scenario])
def test_no_feedback_mentions_a_crash_its_trace_does_not_have(rung_id):
    r = rung(rung_id)
    if _crashes(r.scenario):
        return
    assert [t for t in _said(r) if "crash" in t.lower()] == [], rung_id


def test_delivered_is_used_in_the_listings_sense_only():
    """The listing says `inbox receives X` when the inbox gets an event and `inbox delivered X`
    when a worker's poll hands it over: a hint saying "delivered" means the latter."""
    for r in rungs():
        for text in [q.hint or "" for q in r.questions] + list(r.hints) + list(r.column_hints.values()):
            if re.search(r"\bdelivered\b", text):
                assert "inbox delivered" in text, (r.id, text)


@pytest.mark.parametrize("vocab,value", [("read", "search_by_fields"), ("knowledge", "REJECTED")])
def test_a_likely_wrong_value_names_its_misconception(vocab, value):
    entry = G.misconceptions()["vocabularies"][vocab].get(value)
    assert entry and entry["misconception"] and entry["quote"] and entry["look"]


def test_t8s_wrong_disposition_is_not_blamed_on_the_next_owner(tmp_path, monkeypatch, capsys):
    """The learner decides the disposition only: an understated one is reported as what it
    claims, never as a missing next_owner the kit's plumbing chose."""
    from crashlab.cli import main
    monkeypatch.chdir(tmp_path)
    main(["workshop", "start", "t8"])
    capsys.readouterr()
    assert main(["workshop", "check", "t8"]) == 1         # the starter: "the user no longer cares"
    out = capsys.readouterr().out.split("\nworksheet:")[0]     # the code's feedback
    assert "FAIL  fieldops-cancelled-release-fails" in out and "CANCELLED_NO_EFFECT" in out
    assert "next_owner" not in out
    assert "a common reason is the belief that a compensation that was sent has undone the effect" in out


def _listing_run(kit) -> str:
    return re.search(r"\b(run-\d+)/w1\b", (kit / "listing.txt").read_text(encoding="utf-8")).group(1)


def test_a_personal_kits_code_feedback_uses_the_learners_own_numbering(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    from crashlab.cli import main
    from crashlab.workshop import progress
    monkeypatch.chdir(tmp_path)
    main(["workshop", "start", "t2", "--learner", "ana"])
    kit = Path("workshop/t2")
    own_run = _listing_run(kit)
    assert own_run != "run-82"
    offset = progress.offset(progress.load(Path(".")))
    capsys.readouterr()
    assert main(["workshop", "check", "t2"]) == 1       # the starter resends
    out = capsys.readouterr().out.split("\nworksheet:")[0]
    assert "run-82" not in out and own_run in out
    cited = [int(n) for n in re.findall(r"#(\d+)", out)]
    assert cited and min(cited) >= offset.base            # every event number in the kit's range
    assert "RETRY-01" in out and "matrix-reconciliation-down" in out   # rule ids and names stay
    listing = (kit / "listing.txt").read_text(encoding="utf-8")
    key = re.search(r"reserve-v1-([0-9a-f]{12,})", out).group(1)
    assert key[:12] in listing                            # the learner's own key


def test_a_personal_kits_teaching_card_uses_the_learners_own_identifiers(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    from crashlab.cli import main
    monkeypatch.chdir(tmp_path)
    main(["workshop", "start", "t6", "--learner", "ben"])
    own_run = _listing_run(Path("workshop/t6"))
    main(["workshop", "check", "t6"])
    capsys.readouterr()
    main(["workshop", "reveal", "t6"])
    card = capsys.readouterr().out.split("teaching card")[1]
    assert "intake-run-82" not in card and f"intake-{own_run}" in card

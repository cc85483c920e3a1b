"""Feedback tied to the misconception: a wrong closed answer names the misconception it
usually comes from, the chapter's sentence against it and where to look, never the right
value; every quote is the chapter's own."""
from __future__ import annotations

from pathlib import Path

import pytest

from crashlab.workshop import grade as G
from crashlab.workshop.ladder import rung, vocabularies

CHAPTER = sorted(Path("/work/shared/seeds").glob("001_*.txt"))


def test_every_entry_names_a_vocabulary_value():
    vocab = vocabularies()
    for name, entries in G.misconceptions()["vocabularies"].items():
        assert name in vocab, name
        for value, entry in entries.items():
            assert value in vocab[name], (name, value)
            assert set(entry) == {"misconception", "quote", "look"}


@pytest.mark.skipif(not CHAPTER, reason="the chapter's text is not on this machine")
def test_every_quote_is_found_in_the_chapter():
    text = " ".join(CHAPTER[0].read_text(encoding="utf-8").split())
    for entries in G.misconceptions()["vocabularies"].values():
        for entry in entries.values():
            assert " ".join(entry["quote"].split()) in text, entry["quote"]


def test_a_wrong_disposition_names_the_misconception_not_the_answer():
    r = rung("t8")                                  # the cancelled run whose release is unknown
    model = G.model_answers(r)
    answers = dict(model["answers"], disposition="CANCELLED_NO_EFFECT")
    g = G.grade(r, answers, {})
    (line,) = [w for w in g.wrong if w.startswith("disposition")]
    assert "the user no longer cares" in line and "It does not resolve external state." in line
    assert model["answers"]["disposition"] not in line          # the right value is never named
    assert "look at" in line


def test_a_set_names_the_value_it_should_not_hold():
    r = rung("t1")
    model = G.model_answers(r)
    answers = dict(model["answers"], revalidated=[*model["answers"]["revalidated"], "transcript"])
    (line,) = [w for w in G.grade(r, answers, {}).wrong if w.startswith("revalidated")]
    assert "transcript" in line and "A generated account is not durable evidence." in line


def test_a_wrong_option_without_an_entry_keeps_the_plain_message():
    r = rung("t1")
    model = G.model_answers(r)
    other = "no" if model["answers"]["same_key"] == "yes" else "yes"
    (line,) = [w for w in G.grade(r, dict(model["answers"], same_key=other), {}).wrong]
    assert line == "same_key: your answer is not right"

"""The scenario loader: every error names file, line and field; times parse; the library loads."""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crashlab.scenario.loader as loader_module
from crashlab.vocab.errors import InvalidScenario
from crashlab.scenario import (CARD_FIELDS, DEFAULT_ORIGIN_MS, EVENT_TYPES, clock_ms, format_time, from_dict,
                              library, library_dir, load_file, load_text, parse_duration, parse_time, resolve)

BASE = """\
id: t
title: a scenario
runs:
  - id: run-82
    intent: {tenant: T-1, incident: I-82, part: P-204, slot: S-19, technician: TECH-4, quantity: 1, principal: U-7}
"""


def fail(text: str) -> InvalidScenario:
    with pytest.raises(InvalidScenario) as info:
        load_text(text, file="s.yaml")
    return info.value


@pytest.fixture(scope="module")
def shipped():
    return library()


# --------------------------------------------------------------------------- errors
ERRORS = [
    # (name, appended text, line, field, words the message must contain)
    ("bad yaml", "events: [{at: '10:02', type: cancel\n", 7, None, ["not valid YAML"]),
    ("duplicate key", "seed: 1\nseed: 2\n", 7, "seed", ["duplicate key", "line 6"]),
    ("duplicate nested key", "expect:\n  remote_effects: 1\n  remote_effects: 2\n", 8, "expect.remote_effects",
     ["duplicate key 'remote_effects'", "line 7"]),
    ("duplicate key in a list item", "events:\n  - {at: '10:02', type: cancel}\n  - {at: '10:03', at: '10:04'}\n",
     8, "events[1].at", ["duplicate key 'at'"]),
    ("unknown field", "colour: red\n", 6, "colour", ["unknown field", "expected one of"]),
    ("unknown port", "faults:\n  - match: {port: reservaton, op: reserve}\n    fault: refused\n", 7,
     "faults[0].match.port", ["unknown port", "did you mean 'reservation'"]),
    ("unknown op", "faults:\n  - match: {port: reservation, op: reserv}\n    fault: refused\n", 7,
     "faults[0].match.op", ["reserv", "did you mean 'reserve'"]),
    ("unknown fault", "faults:\n  - match: {port: reservation, op: reserve}\n    fault: explode\n", 8,
     "faults[0].fault", ["unknown fault", "lost_response"]),
    ("bad time", "events:\n  - {at: '10:75', type: cancel}\n", 7, "events[0].at", ["'10:02'"]),
    ("unknown event type", "events:\n  - {at: '10:02', type: cancl}\n", 7, "events[0].type",
     ["unknown event type", "did you mean 'cancel'"]),
    ("unknown event field", "events:\n  - {at: '10:02', type: cancel, why: x}\n", 7, "events[0].why",
     ["unknown field", "payload"]),
    ("event for an unknown run", "events:\n  - {at: '10:02', type: cancel, run: run-99}\n", 7,
     "events[0].run", ["run-99", "run-82"]),
    ("event past the horizon", "clock: {origin: '10:00', horizon: '10:30'}\nevents:\n  - {at: '10:45', type: cancel}\n",
     8, "events[0].at", ["horizon 10:30"]),
    ("bad duration", "services:\n  reservation: {retention: 3 weeks}\n", 7, "services.reservation.retention",
     ["'90s'"]),
    ("bad profile value", "services:\n  reservation: {idempotency: magic}\n", 7,
     "services.reservation.idempotency", ["semantic", "key_only"]),
    ("transport fault on a store", "faults:\n  - match: {port: ledger, op: append}\n    fault: lost_response\n", 8,
     "faults[0].fault", ["set match.port to a service"]),
    ("empty value", "seed:\n", 6, "seed", ["empty", "remove the line"]),
    ("deadline before start", "", 6, "runs[0].deadline", ["after the run's start"]),
    ("bad evidence", "expect:\n  evidence: [ledger:DONE]\n", 7, "expect.evidence[0]", ["CONFIRMED"]),
    ("bad remote effects", "expect:\n  remote_effects: {run-99: 1}\n", 7, "expect.remote_effects", ["run id"]),
    ("bad disposition", "expect:\n  dispositions: [DONE]\n", 7, "expect.dispositions[0]", ["SUCCEEDED"]),
    ("object construction", "description: !!python/object:os.system x\n", 6, None, ["not valid YAML"]),
    ("other actor's malformed intent", "events:\n  - at: '10:02'\n    type: other_actor\n"
     "    args: {intent: {tenant: T-1, part: P-204, slot: S-19, quantity: 0}}\n", 9, "events[0].args",
     ["validation_failed", "quantity must be a positive integer", "reservation service accepts"]),
    ("other actor's misspelt intent", "events:\n  - at: '10:02'\n    type: other_actor\n"
     "    args: {itent: {tenant: T-1}}\n", 9, "events[0].args", ["needs an 'intent' object"]),
    ("other actor's release without a hold", "events:\n  - at: '10:02'\n    type: other_actor\n"
     "    op: release\n    args: {key: k-9}\n", 10, "events[0].args", ["release needs 'ref'"]),
    ("other actor's key not a string", "events:\n  - at: '10:02'\n    type: other_actor\n"
     "    args: {key: 7, intent: {tenant: T-1, incident: I-1, part: P-1, slot: S-1, quantity: 1}}\n", 9,
     "events[0].args", ["'key' must be a string"]),
]


@pytest.mark.parametrize("name,extra,line,field,words", ERRORS, ids=[e[0] for e in ERRORS])
def test_every_error_names_file_line_and_field(name, extra, line, field, words):
    text = BASE + extra
    if name == "deadline before start":
        text = BASE.replace("    intent:", "    start: '10:05'\n    deadline: '10:01'\n    intent:")
    err = fail(text)
    assert (err.file, err.line, err.field) == ("s.yaml", line, field), str(err)
    message = str(err)
    assert message.startswith(f"s.yaml:{line}: " + (f"field '{field}': " if field else ""))
    for word in words:
        assert word in message, message
    assert "\n" not in message and "Traceback" not in message


def test_missing_required_field_names_its_parent_line():
    err = fail(BASE.replace("title: a scenario\n", ""))
    assert (err.line, err.field) == (1, "title") and "missing" in str(err)


def test_empty_and_non_mapping_documents():
    assert "empty" in str(fail(""))
    assert fail("- a\n- b\n").line == 1


def test_resolve_unknown_id_names_the_library_and_suggests():
    with pytest.raises(InvalidScenario) as info:
        resolve("t1-crash-before-dispach")
    err = info.value
    assert err.file == str(library_dir()) and err.field == "id"
    assert "unknown scenario id" in str(err) and "t1-crash-before-dispatch" in str(err)


def test_resolve_by_id_and_by_path_agree():
    by_id = resolve("fieldops-worked-recovery")
    by_path = load_file(library_dir() / "fieldops-worked-recovery.yaml")
    assert by_id == by_path


def test_missing_file_is_named():
    with pytest.raises(InvalidScenario) as info:
        load_file("/nonexistent/scenario.yaml")
    assert info.value.file == "/nonexistent/scenario.yaml"


def test_library_file_must_be_named_after_its_id(tmp_path, monkeypatch):
    (tmp_path / "other-name.yaml").write_text(BASE.replace("id: t", "id: the-id"), encoding="utf-8")
    monkeypatch.setattr(loader_module, "library_dir", lambda: tmp_path)
    with pytest.raises(InvalidScenario) as info:
        library()
    assert (info.value.line, info.value.field) == (1, "id") and "the-id.yaml" in str(info.value)


_JUNK = st.sampled_from([None, 0, -3, 1.5, True, "x", "10:99", "", [], [1], {}, {"zz": 1}, "90s"])


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=st.data(), junk=_JUNK)
def test_a_mutated_document_loads_or_fails_with_invalid_scenario(shipped, data, junk):
    sc = data.draw(st.sampled_from(shipped))
    doc = copy.deepcopy(dict(sc.raw))
    path = data.draw(st.sampled_from([p for p in _paths(doc) if p]))
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = junk
    try:
        from_dict(doc, file="mutant.yaml")
    except InvalidScenario as exc:
        assert exc.file == "mutant.yaml" and "\n" not in str(exc)


# --------------------------------------------------------------------------- times
def test_clock_times_and_durations_parse():
    origin = clock_ms("10:00")
    assert origin == DEFAULT_ORIGIN_MS == 36_000_000
    assert parse_time("10:02", origin) == 120_000
    assert parse_time("10:02:30", origin) == 150_000
    assert parse_time("10:02:30.25", origin) == 150_250
    assert parse_time("90s", origin) == 90_000
    assert parse_time("2m", origin) == 120_000
    assert parse_time(1500, origin) == 1500
    assert parse_duration("1500ms") == 1500
    assert parse_duration("1m30s") == 90_000
    assert parse_duration("1.5s") == 1500
    assert parse_duration("24h") == 86_400_000
    assert parse_duration("7d") == 7 * 86_400_000
    assert parse_duration("250") == 250


@pytest.mark.parametrize("bad", ["10:60", "9:5", "10:02:61", "2 m", "m", "-5s", -1, True, 1.5, None, "1w"])
def test_bad_times_are_refused_with_what_to_write(bad):
    with pytest.raises(ValueError) as info:
        parse_time(bad, DEFAULT_ORIGIN_MS)
    assert "'10:02'" in str(info.value) or "'90s'" in str(info.value)


def test_a_time_before_the_origin_is_refused():
    with pytest.raises(ValueError, match="before the scenario origin"):
        parse_time("09:59", DEFAULT_ORIGIN_MS)


def test_unquoted_clock_times_stay_clock_times():
    sc = load_text(BASE + "events:\n  - {at: 10:02, type: cancel}\n")
    assert sc.events[0].at_ms == 120_000   # not YAML 1.1's base-60 integer 602


@given(t=st.integers(min_value=0, max_value=13 * 3_600_000), origin_min=st.integers(0, 10 * 60))
def test_format_time_round_trips(t, origin_min):
    origin = origin_min * 60_000
    text = format_time(t, origin)
    assert parse_time(text, origin) == t
    assert clock_ms(text) == origin + t


def test_format_time_notation():
    assert format_time(120_000, DEFAULT_ORIGIN_MS) == "10:02"
    assert format_time(150_250, DEFAULT_ORIGIN_MS) == "10:02:30.250"


# --------------------------------------------------------------------------- compiled form
def test_inbox_event_payload_and_delivery_fields_compile_for_the_world():
    sc = load_text(BASE + "events:\n"
                   "  - {at: '10:03', type: cancel, reason: r, duplicates: 1, duplicate_after: 2s,"
                   " event_id: c-1, producer_seq: 4, producer: user}\n"
                   "  - {at: '10:01', type: event, kind: intake, payload: {intent: {a: 1}}}\n"
                   "  - {at: '10:02', type: deploy, canonicalization_version: 2}\n")
    first, second, third = sc.events   # sorted by time
    assert (first.type, first.data) == ("event", {"intent": {"a": 1}, "kind": "intake"})
    assert (second.type, second.run, second.data) == ("deploy", None, {"canonicalization_version": 2})
    assert third.data == {"reason": "r", "duplicates": 1, "duplicate_after_ms": 2000, "event_id": "c-1",
                          "producer_seq": 4, "producer": "user"}
    assert third.run == "run-82" and third.line == 7


def test_profile_knobs_accept_names_without_ms_and_keep_defaults():
    sc = load_text(BASE + "services:\n  reservation: {lag: 5s, consistency: eventual, fencing: true}\n"
                   "  notification:\n")
    assert sc.services["reservation"]["lag_ms"] == 5000
    assert sc.services["reservation"]["fencing"] is True
    assert sc.services["reservation"]["retention_ms"] == 24 * 3_600_000
    assert sc.services["notification"]["idempotency"] == "none"


# --------------------------------------------------------------------------- the library
def test_the_library_loads_and_is_complete(shipped):
    scenarios = shipped
    ids = [s.id for s in scenarios]
    assert len(ids) == len(set(ids)) and len(ids) >= 50
    for sc in scenarios:
        assert sc.source.endswith(f"{sc.id}.yaml")
        assert set(sc.card) == set(CARD_FIELDS), sc.id
        assert sc.tags and sc.expect.get("dispositions"), sc.id
        assert sc.horizon_ms <= 3_600_000, sc.id
        assert all(ev.type != "deny" for ev in sc.events), f"{sc.id}: the world does not act on deny"
        assert set(ev.type for ev in sc.events) <= EVENT_TYPES


REQUIRED = {
    "trace": ["t1-crash-before-dispatch", "t2-commit-before-record", "t3-record-before-response",
              "t4-approval-wait-crash", "t5-incompatible-deployment", "t6-duplicate-input-event",
              "t7-late-callback", "t8-compensation-failure"],
    "crash-point": ["crash-1-before-prepare", "crash-2-after-prepare-before-send",
                    "crash-3-after-send-before-commit-known", "crash-4-after-commit-before-record",
                    "crash-5-after-record-before-checkpoint", "crash-6-after-checkpoint-before-notify"],
    "combined": ["combined-cancel-ambiguous-commit", "combined-deploy-expired-approval",
                 "combined-cancel-after-stale-resume", "combined-cancellation-under-pressure"],
    "fieldops": ["fieldops-worked-recovery", "fieldops-no-key-lookup", "fieldops-cancelled-while-down",
                 "fieldops-cancelled-release-fails"],
    "handoff": ["handoff-1-sent-unknown-cancelled", "handoff-2-confirmed-schema-change",
                "handoff-3-compensation-sent-unknown"],
    "matrix": ["matrix-validation-failure", "matrix-transient-read", "matrix-throttling",
               "matrix-timeout-before-send", "matrix-ambiguous-effect", "matrix-known-completion",
               "matrix-non-compensatable", "matrix-lease-loss", "matrix-stale-checkpoint",
               "matrix-incompatible-version", "matrix-cancellation", "matrix-duplicate-event",
               "matrix-late-callback", "matrix-contradictory-evidence", "matrix-permission-denied",
               "matrix-key-collision-changed-intent", "matrix-new-key-same-intent",
               "matrix-key-retention-expired", "matrix-eventual-consistency-lag",
               "matrix-reconciliation-down", "matrix-retry-amplification",
               "matrix-cross-tenant-key-collision", "matrix-weak-service"],
    "seed-000": ["seed000-lost-publish-response", "seed000-short-wait-keep-job-id"],
    "seed-002": ["seed002-deliberate-retry"],
}


@pytest.mark.parametrize("tag", sorted(REQUIRED))
def test_the_library_covers_the_chapter(shipped, tag):
    by_id = {s.id: s for s in shipped}
    for sid in REQUIRED[tag]:
        assert sid in by_id, f"missing scenario {sid}"
        assert tag in by_id[sid].tags, f"{sid} lacks tag {tag}"
    if tag == "trace":
        for n, sid in enumerate(REQUIRED[tag], start=1):
            assert f"T{n}" in by_id[sid].tags


def test_the_cancellation_under_pressure_timeline():
    sc = resolve("combined-cancellation-under-pressure")
    run = sc.runs[0]
    assert (sc.fmt(run.start_ms), sc.fmt(run.deadline_ms)) == ("10:02", "10:15")
    assert [(sc.fmt(e.at_ms), e.type) for e in sc.events if e.anchor is None] == [("10:04", "cancel"),
                                                                                ("10:06", "callback")]
    assert any(r.match.op == "lookup" and sc.fmt(r.match.until_ms) == "10:20" for r in sc.rules)
    # the chapter's answer only: the cancellation also reaches a replacement before it takes over
    assert sc.expect["dispositions"] == ["CANCELLED_EFFECT_UNKNOWN"]


# --------------------------------------------------------------------------- expectation rules
def _with_expect(expect: dict) -> dict:
    doc = {"id": "rules-demo", "title": "rules", "runs": [{"id": "run-1", "intent": {
        "tenant": "T-1", "incident": "I-1", "part": "P-1", "slot": "S-1", "technician": "TECH-1",
        "quantity": 1, "principal": "U-1"}}], "expect": expect}
    return doc


def test_expectation_rules_name_a_rubric_point_and_a_passage():
    rule = {"point": "D1", "source": "AR-08, Eight traces", "quote": "Crash before dispatch"}
    sc = from_dict(_with_expect({"dispositions": ["SUCCEEDED"], "rules": {"dispositions": rule}}), file="r.yaml")
    assert sc.expect["rules"] == {"dispositions": rule}
    # a file without rules still loads: the rule is optional outside the library
    assert "rules" not in from_dict(_with_expect({"dispositions": ["SUCCEEDED"]}), file="r.yaml").expect


@pytest.mark.parametrize("rules, field, words", [
    ({"dispositions": {"point": "Z9", "source": "s", "quote": "q"}}, "expect.rules.dispositions.point",
     "unknown rubric point"),
    ({"dispositions": {"point": "D1", "source": "s"}}, "expect.rules.dispositions.quote", "required field"),
    ({"evidence": {"point": "C2", "source": "s", "quote": "q"}}, "expect.rules.evidence", "expect has no 'evidence'"),
    ({"dispositons": {"point": "D1", "source": "s", "quote": "q"}}, "expect.rules.dispositons", "did you mean"),
])
def test_bad_expectation_rules_name_the_field(rules, field, words):
    with pytest.raises(InvalidScenario) as info:
        from_dict(_with_expect({"dispositions": ["SUCCEEDED"], "rules": rules}), file="r.yaml")
    assert info.value.field == field and words in str(info.value)


def test_rubric_point_ids_match_the_rubric():
    from crashlab.checks.rubric import RUBRIC
    from crashlab.vocab.model import RUBRIC_POINT_IDS
    assert tuple(p.id for p in RUBRIC) == RUBRIC_POINT_IDS


def test_every_library_expectation_names_its_rule_and_passage():
    """A miss is charged to the point its rule names, so the library gives one for each expectation."""
    from crashlab.scenario import EXPECT_FIELDS

    for sc in library():
        rules = sc.expect.get("rules") or {}
        fields = set(sc.expect) & (EXPECT_FIELDS - {"rules"})
        assert fields, f"{sc.id} expects nothing"
        assert set(rules) == fields, f"{sc.id}: expectations without a rule: {sorted(fields - set(rules))}"
        for name, rule in rules.items():
            assert rule["source"].startswith(("AR-08, ", "Seed 000, ", "Seed 002, ", "crashlab refinement")), \
                f"{sc.id}: {name} rule names no chapter, seed or refinement passage"
            assert len(rule["quote"]) >= 20, f"{sc.id}: {name} rule quotes too little"


def test_library_quotes_are_the_chapters_own_words():
    """Every chapter or seed quote of a library rule occurs in the seed text (ellipses join parts)."""
    import re
    from pathlib import Path

    seeds = Path("/work/shared/seeds")
    if not seeds.is_dir():
        pytest.skip("the seed texts are not on this machine")
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted(seeds.glob("*.txt")))
    norm = lambda s: re.sub(r"\s+", " ", s.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"'))  # noqa: E731
    text = norm(text)
    for sc in library():
        for name, rule in (sc.expect.get("rules") or {}).items():
            if rule["source"].startswith("crashlab refinement"):
                continue
            for part in norm(rule["quote"]).split(" ... "):
                assert part.strip(". ") in text, f"{sc.id}: {name} quote not in the seeds: {part!r}"

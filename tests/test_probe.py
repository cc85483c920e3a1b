"""``crashlab probe`` against the sandbox: for each profile the sandbox serves, the probe recovers
every field it can observe within its budget and leaves nothing behind; the safety rules refuse
what they must (no request sent); bad mapping files get file/line/field errors; ``--services``
runs the simulator on a profile. No wall-clock assertions: the sandbox runs at time scale 1 only
so that the probe's real waits are the service's retention and lag."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.vocab.errors import CrashlabError, InvalidScenario, UsageError
from crashlab.probe.client import BudgetExhausted, Client, Exchange, check_target
from crashlab.probe.interpret import interpret
from crashlab.probe.mapping import from_doc, load_map
from crashlab.probe.plan import Observed, execute, worst_case
from crashlab.probe.profile import apply_profile, load_profile, profile_text
from crashlab.scenario.loader import from_dict, resolve
from crashlab.scenario.yaml import parse_yaml

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "examples" / "probe" / "sandbox-map.yaml"
DENIED = "crashlab-probe-denied"


def scenario(**profile):
    return from_dict({"id": "probe-test", "title": "probe test", "clock": {"origin": "10:00", "horizon": "23:00"},
                      "services": {"reservation": {"denied_principals": [DENIED], **profile}},
                      "runs": [{"id": "run-1", "intent": {"tenant": "T-1"}}]})


@pytest.fixture
def serve(serve):
    """The shared sandbox fixture (tests/conftest.py) in real time: the probe's waits are real."""
    return lambda sc: serve(sc, 1.0)


def calls(sb):
    return [e for e in sb.trace.events if e["kind"] == "call"]


def probe(sb, wait_ms=400, budget=20):
    pmap = load_map(MAP)
    client = Client(sb.root + "/w/run-1.w1", pmap, budget=budget)
    obs = execute(pmap, client, wait_ms=wait_ms)
    return pmap, client, obs, interpret(pmap, obs)


def left_behind(sb):
    return [r.ref for r in sb.services["reservation"].records if r.ref.startswith("R-") and r.status != "released"]


PROFILES = [   # what the sandbox serves -> what the probe must write under services
    ({"idempotency": "semantic", "lookup": "by_key"},
     {"idempotency": "semantic", "lookup": "by_key", "consistency": "strong", "compensation": True,
      "error_replay": False}),
    ({"idempotency": "key_only", "lookup": "by_incident_slot"},
     {"idempotency": "key_only", "lookup": "by_incident_slot", "consistency": "strong", "compensation": True,
      "error_replay": False}),
    ({"idempotency": "none", "lookup": "none"},
     {"idempotency": "none", "lookup": "none", "compensation": True, "error_replay": False}),
    ({"idempotency": "semantic", "lookup": "none", "compensation": False},
     {"idempotency": "semantic", "lookup": "none", "compensation": False, "error_replay": False}),
    ({"idempotency": "semantic", "lookup": "by_key", "consistency": "eventual", "lag": "150ms"},
     {"idempotency": "semantic", "lookup": "by_key", "consistency": "eventual", "compensation": True,
      "error_replay": False}),
    ({"idempotency": "semantic", "error_replay": True},
     {"idempotency": "semantic", "lookup": "by_key", "consistency": "strong", "compensation": True,
      "error_replay": True}),
    ({"idempotency": "key_only", "error_replay": True},
     {"idempotency": "key_only", "lookup": "by_key", "consistency": "strong", "compensation": True,
      "error_replay": True}),
]


@pytest.mark.parametrize("served,expected", PROFILES, ids=["semantic-by_key", "key_only-search", "none-none",
                                                          "no-release", "eventual", "semantic-errors",
                                                          "key_only-errors"])
def test_the_probe_recovers_each_profile_within_budget_and_leaves_nothing(serve, served, expected, tmp_path):
    sb = serve(scenario(**served))
    pmap, client, obs, profile = probe(sb)
    got = profile.services()
    lag = got.pop("lag_ms", None)
    assert got == expected
    if served.get("consistency") == "eventual":
        assert lag is not None and lag >= 150       # an upper bound of the lag, never below it
    assert len(client.sent) <= 20 and len(calls(sb)) == len(client.sent)
    if served.get("compensation", True):
        assert left_behind(sb) == [] and obs.residue == []
    else:   # a service that cannot release: the effects are listed as the residue
        assert sorted(obs.residue) == sorted(left_behind(sb)) and obs.residue
    assert profile.notes["unknown_key"].value is (expected["lookup"] == "by_key")
    # the written profile loads back as a services section and carries its evidence
    out = tmp_path / "profile.yaml"
    out.write_text(profile_text(profile, {"url": sb.root}, str(out)))
    loaded = load_profile(out)
    assert loaded["reservation"]["idempotency"] == expected["idempotency"]
    evidence = parse_yaml(out.read_text())["evidence"]["reservation"]
    assert "observed" in evidence["idempotency"] and evidence["idempotency"]["responses"]
    assert "untested" in evidence["max_delivery_delay"] and "untested" in evidence["throttling"]


def test_retention_is_bounded_from_both_sides(serve):
    sb = serve(scenario(idempotency="semantic", retention="300ms"))
    pmap, client, obs, profile = probe(sb, wait_ms=1000)
    written = profile.services()["retention_ms"]
    assert written <= 300            # the last replay seen: a lower bound, never above the truth
    assert profile.fields["retention_ms"].status == "observed" and left_behind(sb) == []
    kept = serve(scenario(idempotency="semantic"))       # 24 h: replayed after the whole wait
    _, _, _, profile = probe(kept, wait_ms=300)
    assert profile.fields["retention_ms"].status == "untested" and "retention_ms" not in profile.services()


def test_a_key_only_service_reuse_is_a_critical_local_error_in_the_evidence(serve):
    sb = serve(scenario(idempotency="key_only"))
    _, _, _, profile = probe(sb)
    assert "critical local error" in profile.fields["idempotency"].text


def test_error_replay_is_caught_when_an_endpoint_stores_errors():
    pmap = load_map(MAP)
    obs = Observed(probe_id="crashlab-probe-x", keys={}, intents={}, wait_ms=0)
    err = {"error": {"code": "server_error"}}
    obs.steps = {"first": [Exchange(1, "first", "POST", "/r", "k1", 200, {"ref": "R-1"})],
                 "error": [Exchange(2, "error", "POST", "/r", "k3", 500, err)],
                 "after_error": [Exchange(3, "after_error", "POST", "/r", "k3", 500, err)]}
    assert interpret(pmap, obs).fields["error_replay"].value is True
    obs.steps["after_error"] = [Exchange(3, "after_error", "POST", "/r", "k3", 200, {"ref": "R-9"})]
    assert interpret(pmap, obs).fields["error_replay"].value is False
    # the same error for the good intent means nothing when no good request ever succeeded
    obs.steps["first"] = [Exchange(1, "first", "POST", "/r", "k1", 503, err)]
    obs.steps["after_error"] = [Exchange(3, "after_error", "POST", "/r", "k3", 500, err)]
    found = interpret(pmap, obs).fields["error_replay"]
    assert found.status == "untested" and found.value is None and "made no effect" in found.text


def test_no_answer_is_never_observed_as_a_replay_or_a_negative():
    pmap = load_map(MAP)
    obs = Observed(probe_id="crashlab-probe-x", keys={}, intents={}, wait_ms=0)
    lost = lambda n, step: Exchange(n, step, "POST", "/r", "k3", 0, None, error="ConnectionResetError")  # noqa: E731
    obs.steps = {"error": [lost(1, "error")], "after_error": [lost(2, "after_error")],
                 "unknown": [Exchange(3, "unknown", "GET", "/r", "k0", 0, None, error="timeout")]}
    profile = interpret(pmap, obs)
    assert profile.fields["error_replay"].status == "untested" and "no answer" in profile.fields["error_replay"].text
    assert profile.notes["unknown_key"].status == "untested"


def test_nothing_listening_at_the_url_is_a_usage_error_after_one_request(tmp_path, capsys):
    import socket

    with socket.socket() as s:          # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "profile.yaml"
    assert main(["probe", f"http://127.0.0.1:{port}/w/run-1.w1", "--map", str(MAP), "--execute",
                 "--out", str(out)]) == 3
    printed = capsys.readouterr()
    assert f"nothing answers at http://127.0.0.1:{port}/w/run-1.w1" in printed.err and "#2" not in printed.out
    assert "unknown:" not in printed.out and not out.exists()


def test_error_replay_is_a_service_knob_the_loader_checks():
    sc = scenario(idempotency="none", lookup="none")
    assert "error_replay" not in sc.services["reservation"]          # absent unless declared: traces unchanged
    with pytest.raises(InvalidScenario, match="error_replay: true stores an error"):
        scenario(idempotency="none", lookup="none", error_replay=True)


def test_a_race_that_makes_two_effects_under_one_key_downgrades_to_none():
    pmap = load_map(MAP)
    obs = Observed(probe_id="p", keys={}, intents={}, wait_ms=0)
    ok = lambda n, ref, step: Exchange(n, step, "POST", "/r", "k", 200, {"ref": ref})  # noqa: E731
    obs.steps = {"first": [ok(1, "R-1", "first")], "again": [ok(2, "R-1", "again")],
                 "changed": [Exchange(3, "changed", "POST", "/r", "k", 422, {"error": {"code": "intent_mismatch"}})],
                 "race": [ok(4, "R-2", "race"), ok(5, "R-3", "race")]}
    profile = interpret(pmap, obs)
    assert profile.fields["idempotency"].value == "none" and "not atomic" in profile.fields["idempotency"].text


# ----------------------------------------------------------------------------- safety
def test_a_non_loopback_host_is_refused_unless_named_and_declared(tmp_path):
    pmap = load_map(MAP)                                  # declares endpoint: sandbox
    with pytest.raises(UsageError, match="not loopback"):
        check_target("http://10.1.2.3:8080/w/run-1.w1", pmap)
    with pytest.raises(UsageError, match="not loopback"):
        check_target("http://example.test/", pmap, ("other.test",))
    assert check_target("http://10.1.2.3:8080/w", pmap, ("10.1.2.3",))[1] == "10.1.2.3"
    text = MAP.read_text().replace("endpoint: sandbox", "")
    undeclared = tmp_path / "map.yaml"
    undeclared.write_text(text)
    with pytest.raises(UsageError, match="endpoint: test"):
        check_target("http://10.1.2.3:8080/w", load_map(undeclared), ("10.1.2.3",))
    for loop in ("http://127.0.0.1:1/", "http://localhost:1/", "http://[::1]:1/"):
        check_target(loop, pmap)


def test_the_command_refuses_a_remote_host_before_sending(capsys):
    code = main(["probe", "http://192.0.2.1:9/w/run-1.w1", "--map", str(MAP), "--execute"])
    assert code == 3 and "--allow-host 192.0.2.1" in capsys.readouterr().err


def test_the_budget_is_enforced_before_and_during_the_run(serve):
    sb = serve(scenario())
    pmap = load_map(MAP)
    assert worst_case(pmap) <= 20
    with pytest.raises(UsageError, match="needs up to"):
        execute(pmap, Client(sb.root + "/w/run-1.w1", pmap, budget=worst_case(pmap) - 1), wait_ms=0)
    assert calls(sb) == []                               # refused before anything was sent
    client = Client(sb.root + "/w/run-1.w1", pmap, budget=1)
    client.send("lookup", pmap.requests["lookup"], {"key": "crashlab-probe-x-k0"})
    with pytest.raises(BudgetExhausted):
        client.send("lookup", pmap.requests["lookup"], {"key": "crashlab-probe-x-k0"})
    assert len(calls(sb)) == 1                           # the request beyond the budget never left


def test_dry_run_is_the_default_and_sends_nothing(serve, capsys, tmp_path):
    sb = serve(scenario())
    out = tmp_path / "profile.yaml"
    for extra in ([], ["--dry-run"]):
        assert main(["probe", sb.root + "/w/run-1.w1", "--map", str(MAP), "--out", str(out), *extra]) == 0
        printed = capsys.readouterr().out
        assert "dry run: nothing was sent" in printed and "at most" in printed
    assert calls(sb) == [] and not out.exists()
    assert main(["probe", sb.root + "/w/run-1.w1", "--map", str(MAP), "--execute", "--dry-run"]) == 3


def test_the_docs_walk_through_probes_the_sandbox_and_runs_on_the_profile(serve, capsys, tmp_path):
    sb = serve(resolve(str(ROOT / "examples" / "probe" / "sandbox-services.yaml")))   # docs/probe.md
    out = tmp_path / "profile.yaml"
    code = main(["probe", sb.root + "/w/run-1.w1", "--map", str(MAP), "--out", str(out), "--execute",
                 "--wait", "200ms"])
    printed = capsys.readouterr().out
    assert code == 0 and "residue: none" in printed
    keys = {e["args"].get("key") for e in calls(sb)} - {None}
    assert keys and all(k.startswith("crashlab-probe-") for k in keys)
    intents = [e["args"]["intent"] for e in calls(sb) if "intent" in e["args"] and e["op"] == "reserve"]
    assert all(i["tenant"].startswith("crashlab-probe-") for i in intents)      # the marked intent
    assert load_profile(out) == {"reservation": {"idempotency": "semantic", "lookup": "by_key",
                                                 "consistency": "strong", "compensation": True,
                                                 "error_replay": False}}
    assert left_behind(sb) == []
    assert main(["run", "matrix-ambiguous-effect", "--services", str(out), "--out", str(tmp_path / "o")]) == 0
    docs = (ROOT / "docs" / "probe.md").read_text()
    assert "crashlab sandbox serve examples/probe/sandbox-services.yaml" in docs
    assert "--map examples/probe/sandbox-map.yaml --execute --out profile.yaml" in docs


# ----------------------------------------------------------------------------- bad mapping files
BAD_MAPS = [
    ("  header: Idempotency-Key", "  heder: Idempotency-Key", "did you mean 'header'"),
    ('  tenant: "{probe}"\n  incident: "{probe}"\n', "  tenant: T-1\n  incident: I-1\n", 'put "{probe}"'),
    ('path: "/reservation/lookup?key={key}"', 'path: "/reservation/lookup?id={ref}"', "must carry {key}"),
    ("body: {ref: \"{ref}\"}", "body: {ref: \"{reff}\"}", "unknown placeholder {reff}"),
    ("endpoint: sandbox", "endpoint: production", "unknown endpoint"),
    ("  found: found ", "  # found: found ", "needs answers.found"),
    ("    method: GET\n    path: \"/reservation/lookup", "    method: GET\n    body: {a: 1}\n    path: \"/reservation/lookup",
     "a GET request has no body"),
    ("changed:                      # the other payload sent under a used key\n  quantity: 2",
     "changed:\n  quantity: 1", "differs from the intent"),
    ("service: reservation", "service: reservation\n  bad: [", "not valid YAML"),
]


@pytest.mark.parametrize("old,new,message", BAD_MAPS)
def test_bad_mapping_files_name_the_file_line_and_field(tmp_path, capsys, old, new, message):
    text = MAP.read_text()
    assert old in text, old
    bad = tmp_path / "map.yaml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(InvalidScenario) as err:
        load_map(bad)
    assert message in str(err.value) and err.value.line is not None and str(bad) in str(err.value)
    code = main(["probe", "http://127.0.0.1:9/w", "--map", str(bad)])
    assert code == 3 and message in capsys.readouterr().err


def test_a_mapping_file_that_is_not_a_mapping_or_missing():
    with pytest.raises(InvalidScenario, match="YAML mapping"):
        from_doc(["a"], file="m.yaml")
    with pytest.raises(InvalidScenario, match="no such mapping file"):
        load_map("/nonexistent/map.yaml")


# ----------------------------------------------------------------------------- --services
PROFILE = """services:
  reservation:
    idempotency: key_only
    retention: 90s
evidence:
  reservation:
    idempotency: {observed: "the same key with another payload returned the first effect"}
probe: {url: "http://127.0.0.1:1/w"}
"""


def test_a_profile_replaces_the_fields_it_declares_and_keeps_the_rest(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE)
    base = from_dict({"id": "s", "title": "s", "services": {"reservation": {"retention_ms": 1000, "proxy_retries": 1}},
                      "runs": [{"id": "r", "intent": {"tenant": "T"}}]})
    got = apply_profile(base, load_profile(path), str(path)).services["reservation"]
    assert got["idempotency"] == "key_only" and got["retention_ms"] == 90_000 and got["proxy_retries"] == 1
    lagging = from_dict({"id": "s", "title": "s", "services": {"reservation": {"consistency": "eventual", "lag": "2s"}},
                         "runs": [{"id": "r", "intent": {"tenant": "T"}}]})
    strong = apply_profile(lagging, {"reservation": {"consistency": "strong"}}, "p").services["reservation"]
    assert strong["consistency"] == "strong" and strong["lag_ms"] == 0     # the lag goes with the consistency
    registry = resolve("seed000-lost-publish-response")
    with pytest.raises(UsageError, match="has no reservation service"):
        apply_profile(registry, load_profile(path), str(path))


def test_a_bad_profile_names_its_file_and_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE.replace("key_only", "sometimes"))
    with pytest.raises(InvalidScenario) as err:
        load_profile(path)
    assert err.value.line == 3 and "sometimes" in str(err.value) and str(path) in str(err.value)
    path.write_text(PROFILE + "extra: 1\n")
    with pytest.raises(InvalidScenario, match="unknown field"):
        load_profile(path)


def test_run_and_conformance_take_services(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE)
    code = main(["run", "matrix-ambiguous-effect", "--services", str(path), "--out", str(tmp_path / "o")])
    captured = capsys.readouterr()
    assert code in (0, 1) and "applied to 1 of 1 scenario(s): matrix-ambiguous-effect" in captured.err
    assert f"--services {path}" in captured.out
    trace = next((tmp_path / "o").glob("*.jsonl")).read_text().splitlines()[0]
    assert '"idempotency":"key_only"' in trace.replace(" ", "") and '"retention_ms":90000' in trace.replace(" ", "")
    code = main(["conformance", "--scenario", "matrix-ambiguous-effect", "--scenario", "seed000-lost-publish-response",
                 "--services", str(path), "--out", str(tmp_path / "c"), "-j", "1", "-q"])
    err = capsys.readouterr().err
    assert "applied to 1 of 2" in err and "untouched (no service of that name): seed000-lost-publish-response" in err
    assert "it changed the services of 1: matrix-ambiguous-effect" in err and "EXP-*" in err
    assert code in (1, 2)   # two scenarios leave rubric points not exercised: never a pass
    mismatch = tmp_path / "n.yaml"
    mismatch.write_text("services:\n  notification: {idempotency: none}\n")
    assert main(["run", "matrix-ambiguous-effect", "--services", str(mismatch), "--out", str(tmp_path / "o")]) == 3
    assert "has no notification service" in capsys.readouterr().err


def test_the_plan_text_matches_the_docs():
    docs = (ROOT / "docs" / "probe.md").read_text()
    from crashlab.probe.plan import PLAN
    for step in PLAN:
        assert f"`{step.name}`" in docs, step.name
    assert re.search(r"examples/probe/sandbox-map\.yaml", docs)


def test_errors_are_crashlab_errors():
    assert issubclass(BudgetExhausted, CrashlabError)


NOTIFY_MAP = """service: notification
key: {header: Idempotency-Key}
requests:
  effect: {method: POST, path: /notification/send, body: {intent: "{intent}"}}
intent: {to: "{probe}", message: hello}
changed: {message: another}
answers: {ref: "message_id|ref", replayed: replayed}
"""


@pytest.mark.parametrize("mode", ["semantic", "key_only", "none"])
def test_a_notification_service_without_reads_or_release(serve, tmp_path, mode):
    sb = serve(from_dict({"id": "n", "title": "n", "clock": {"origin": "10:00", "horizon": "23:00"},
                          "services": {"notification": {"idempotency": mode, "retention": "24h"}},
                          "runs": [{"id": "run-1", "service": "notification", "intent": {"to": "x"}}]}))
    path = tmp_path / "notify.yaml"
    path.write_text(NOTIFY_MAP)
    pmap = load_map(path)
    client = Client(sb.root + "/w/run-1.w1", pmap, budget=20)
    obs = execute(pmap, client, wait_ms=200)
    profile = interpret(pmap, obs)
    assert profile.services() == {"idempotency": mode}
    assert set(profile.fields) == {"idempotency", "retention_ms", "error_replay"}
    sent = len(sb.services["notification"].records)
    assert obs.residue and len(obs.residue) == sent      # nothing can release a message: all of it is listed
    assert len(client.sent) <= 20


def test_an_effect_answer_without_a_reference_stops_the_probe_and_is_found_and_released(serve, tmp_path, capsys):
    sb = serve(scenario())
    bad = tmp_path / "map.yaml"
    bad.write_text(MAP.read_text().replace("  ref: ref ", "  ref: reference "))
    out = tmp_path / "profile.yaml"
    code = main(["probe", sb.root + "/w/run-1.w1", "--map", str(bad), "--execute", "--wait", "100ms",
                 "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 3 and "unknown: #1 POST /reservation/reserve" in printed.out and "cannot name" in printed.out
    assert "#1 POST /reservation/reserve" in printed.err and "answers.ref (reference)" in printed.err
    assert "#2" not in printed.out.split("sending:")[1].split("find")[0]   # nothing after the first answer
    assert left_behind(sb) == [] and not out.exists()    # found by the probe's id and released; no profile
    assert main(["probe", sb.root + "/w/run-1.w1", "--map", str(bad), "--out", str(bad)]) == 3


def test_an_effect_whose_answer_was_lost_is_found_by_the_probe_id_and_released(serve, capsys, tmp_path):
    # the 7th reserve is after_error's: committed, and the connection closed with no answer
    sb = serve(from_dict({"id": "lost", "title": "lost", "clock": {"origin": "10:00", "horizon": "23:00"},
                          "services": {"reservation": {"denied_principals": [DENIED]}},
                          "runs": [{"id": "run-1", "intent": {"tenant": "T-1"}}],
                          "faults": [{"match": {"port": "reservation", "op": "reserve", "nth": 7},
                                      "fault": "lost_response"}]}))
    # another actor's hold the probe's search lists too (same incident and slot), without the probe's id
    other = sb.services["reservation"].execute("reserve", {"key": "someone-else", "intent": {
        "tenant": "T-9", "incident": "I-1", "part": "P", "slot": "S-19", "quantity": 1}}, cause="other_actor",
        run=None, call=None)
    shared = tmp_path / "map.yaml"
    shared.write_text(MAP.read_text().replace('  incident: "{probe}"', "  incident: I-1"))
    code = main(["probe", sb.root + "/w/run-1.w1", "--map", str(shared), "--execute", "--wait", "100ms"])
    out = capsys.readouterr().out
    assert code == 1 and "unknown: #" in out                  # a request got no answer: said, never hidden
    assert "find" in out and "lists R-1, R-2, R-3, R-4" in out   # R-1 is the other actor's
    assert left_behind(sb) == [other["ref"]]                 # ours found and released; the other's kept


def test_a_scenario_whose_services_the_profile_changed_is_judged_by_the_invariants_only(tmp_path):
    """Its expectations were written for its own services: under another profile an EXP-* miss
    would blame the adapter for the expectation's mismatch."""
    import json

    from crashlab.probe.profile import with_services
    from crashlab.scenario.loader import resolve

    own = resolve("fieldops-no-key-lookup")
    path = tmp_path / "p.yaml"
    path.write_text("services:\n  reservation: {idempotency: semantic, lookup: by_key}\n")
    [changed] = with_services([own], str(path))
    assert own.expect and changed.expect == {}
    assert main(["run", "fieldops-no-key-lookup", "--out", str(tmp_path / "own")]) == 0
    code = main(["conformance", "--scenario", "fieldops-no-key-lookup", "--services", str(path), "-q", "-j", "1",
                 "--out", str(tmp_path / "o"), "--json", str(tmp_path / "b.json")])
    result = json.loads((tmp_path / "b.json").read_text())
    assert not [v for s in result["scenarios"] for v in s["violations"] if v["invariant"].startswith("EXP-")]
    # nothing failed; one scenario does not exercise every rubric point: inconclusive, not a pass
    assert code == 2 and result["verdict"] == "unknown" and result["score"]["not_exercised"] and not result["lost"]
    unchanged = tmp_path / "same.yaml"
    unchanged.write_text("services:\n  reservation: {idempotency: %s, lookup: %s}\n"
                         % (own.services["reservation"]["idempotency"], own.services["reservation"]["lookup"]))
    assert with_services([own], str(unchanged))[0].expect == own.expect


def test_a_sweep_crashes_the_scenario_on_the_profiles_services(tmp_path):
    from crashlab.run.drivers import load_adapter
    from crashlab.probe.profile import with_services
    from crashlab.scenario.loader import resolve
    from crashlab.run.sweep import LocalExecutor, crash_jobs

    path = tmp_path / "p.yaml"
    path.write_text("services:\n  reservation: {idempotency: key_only, lookup: by_key}\n")
    [sc] = with_services([resolve("t2-commit-before-record")], str(path))
    jobs = crash_jobs([sc], load_adapter(None), double=False, executor=LocalExecutor(1, in_process=True))
    assert jobs and all(job.document()["services"]["reservation"]["idempotency"] == "key_only" for job in jobs)
    assert main(["sweep", "--scenario", "t2-commit-before-record", "--services", str(path), "-q", "-j", "1",
                 "--out", str(tmp_path / "o")]) == 2   # nothing failed; one scenario leaves points not exercised


# ----------------------------------------------------------------------------- answers that are not the service's
class _Stub:
    """A tiny local HTTP server answering every request the same way (a redirect, an HTML page, JSON of
    another shape): what stands in front of an API when the URL or the mapping file is wrong."""

    def __init__(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        stub = self
        self.requests: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return

            def _answer(self) -> None:
                stub.requests.append(f"{self.command} {self.path}")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            do_GET = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/api"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


STUBS = {   # what every request gets -> what the error must say
    "redirect": ((302, b"", "text/plain", {"Location": "https://127.0.0.1/login"}),
                 "302: a redirect to https://127.0.0.1/login"),
    "html": ((200, b"<html><body>Welcome</body></html>", "text/html; charset=utf-8", None),
             "the body is not JSON (text/html)"),
    "wrong-shape": ((200, b'{"status": "ok", "data": {}}', "application/json", None),
                    "names no reference at answers.ref (ref)"),
    "not-served": ((404, b'{"detail": "Not Found"}', "application/json", None),
                   "404: the service does not serve this path (Not Found)"),
    "refused": ((401, b'{"error": {"code": "unauthenticated", "message": "no token"}}', "application/json", None),
                "401 unauthenticated: the first request (the intent under a new key) was refused (no token)"),
}


@pytest.mark.parametrize("kind", list(STUBS))
def test_an_answer_that_is_not_the_services_own_stops_the_probe_and_writes_no_profile(kind, tmp_path, capsys):
    (status, body, ctype, headers), says = STUBS[kind]
    stub = _Stub(status, body, ctype, headers)
    out = tmp_path / "profile.yaml"
    out.write_text("# a profile from an earlier probe\n")
    try:
        code = main(["probe", stub.url, "--map", str(MAP), "--execute", "--wait", "100ms", "--out", str(out)])
    finally:
        stub.close()
    printed = capsys.readouterr()
    first = "#1 POST /reservation/reserve key crashlab-probe-"
    assert code == 3, printed
    assert first in printed.err and says in printed.err and "no profile was written" in printed.err
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err        # one line
    assert "error_replay" not in printed.out and "profile (" not in printed.out   # nothing interpreted
    assert out.read_text() == "# a profile from an earlier probe\n"              # neither written nor removed
    # the plan stopped at its first answer; only the search for an effect the answer may hide followed it
    assert stub.requests[0] == "POST /api/reservation/reserve"
    assert all(r.startswith("GET /api/reservation/search") for r in stub.requests[1:]) and len(stub.requests) <= 2


def test_a_sandbox_url_with_a_run_it_does_not_serve_stops_at_the_first_answer(serve, capsys, tmp_path):
    """The README's pair measured before: every request 404, exit 0 and 'error_replay: true'."""
    sb = serve(resolve(str(ROOT / "examples" / "probe" / "sandbox-services.yaml")))
    out = tmp_path / "profile.yaml"
    out.write_text("services: {}\n")
    code = main(["probe", sb.root + "/w/run-82.w1", "--map", str(MAP), "--execute", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 3 and len(calls(sb)) == 0          # the sandbox's router answered, no service
    assert out.read_text() == "services: {}\n"        # the earlier file stays as it was
    assert "#1 POST /reservation/reserve" in printed.err and "-> 404 bad_request" in printed.err
    assert "the URL's worker path is not one the service serves" in printed.err
    assert "no worker 'run-82.w1'" in printed.err and "crashlab sandbox serve` prints" in printed.err
    assert "#2 " not in printed.out


def test_a_mapped_path_the_sandbox_does_not_serve_is_named(serve, capsys, tmp_path):
    sb = serve(scenario())
    bad = tmp_path / "map.yaml"
    bad.write_text(MAP.read_text().replace("/reservation/lookup?key", "/reservation/lookup_by_key?key"))
    code = main(["probe", sb.root + "/w/run-1.w1", "--map", str(bad), "--execute", "--wait", "100ms"])
    printed = capsys.readouterr()
    assert code == 3 and "#4 GET /reservation/lookup_by_key" in printed.err
    assert "requests.lookup (GET /reservation/lookup_by_key)" in printed.err
    assert "residue: none" in printed.out and left_behind(sb) == []      # the hold it made is released


def test_which_answers_are_the_services_own():
    """A refusal the service chose is evidence; a 404 is only where the path is known served or the read
    says 'not found' in the map's terms; a 405 never."""
    from crashlab.probe.evidence import judge

    pmap = load_map(MAP)

    def ex(status, body, method="POST"):
        return Exchange(1, "s", method, "/r", "k", status, body)
    served: set[str] = set()
    assert judge(pmap, "first", "effect", ex(200, {"ref": "R-1"}), served) is None and served == {"effect"}
    for status, code in ((409, "conflict_in_flight"), (422, "intent_mismatch"), (400, "validation_failed"),
                         (403, "permission_denied"), (404, "not_found")):
        assert judge(pmap, "changed", "effect", ex(status, {"error": {"code": code}}), served) is None
    assert judge(pmap, "first", "effect", ex(404, {"error": {"code": "not_found"}}), set()) is not None
    assert judge(pmap, "again", "effect", ex(405, None), served) is not None
    for body in ({"found": False}, {"error": {"code": "not_found"}}, {"error": "resource_missing"}):
        assert judge(pmap, "unknown", "lookup", ex(404, body, "GET"), set()) is None
    assert judge(pmap, "read", "lookup", ex(404, {"detail": "Not Found"}, "GET"), set()) is not None
    assert judge(pmap, "read", "lookup", ex(200, {"record": None}, "GET"), set()) is not None   # no found
    assert judge(pmap, "search", "search", ex(200, {"records": None}, "GET"), set()) is not None
    assert judge(pmap, "release", "release", ex(204, None), set()) is None     # a release needs no body


def test_the_timeout_bounds_the_whole_request_not_each_read():
    """A server that dribbles its answer a byte at a time never lets a per-read timeout expire;
    --timeout cuts the whole exchange off, and what was sent by then is no answer."""
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def dribble():
        conn, _ = listener.accept()
        conn.recv(65536)
        answer = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"ref": "R-1", "status": "held"}'
        for byte in answer:
            if stop.is_set():
                break
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.2)
        conn.close()

    server = threading.Thread(target=dribble, daemon=True)
    server.start()
    try:
        pmap = load_map(MAP)
        client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}/w/run-1.w1", pmap, budget=3, timeout_s=1.0)
        ex = client.send("effect", pmap.requests["effect"], {"key": "k1", "intent": {"tenant": "T-1"}})
        assert ex.status == 0 and "within 1 s" in ex.error and "whole request" in ex.error, ex
    finally:
        stop.set()
        listener.close()
        server.join(timeout=30)
    assert not server.is_alive()


def test_a_run_under_a_profile_says_everywhere_which_expectations_it_set_aside(tmp_path, capsys):
    """A profile that changes a service (here only its latency) sets the scenario's expectations
    aside: the scorecard says so on standard output (-q too), the results JSON names the profile and
    the scenarios, each of them carries a note, and every repro line names the profile, so that it
    runs what was judged. Without them a one-knob profile turned a DIFF into a silent pass."""
    import json

    path = tmp_path / "lat.yaml"
    path.write_text("services:\n  reservation: {latency: 41ms}\n")
    ids = ["t2-commit-before-record", "matrix-ambiguous-effect"]
    argv = ["conformance", "--adapter", "crashlab.gallery.alternatives:EscalateEveryAmbiguity", "-j", "1",
            "--scenario", ids[0], "--scenario", ids[1], "--out", str(tmp_path / "o")]
    main(argv + ["--json", str(tmp_path / "own.json")])
    own = json.loads((tmp_path / "own.json").read_text())
    assert any(v["invariant"].startswith("EXP-") for s in own["scenarios"] for v in s["violations"])
    capsys.readouterr()
    main(argv + ["--services", str(path), "--json", str(tmp_path / "p.json"), "-q"])
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "p.json").read_text())
    assert result["services"] == {"profile": str(path), "without_expectations": sorted(ids)}
    assert f"services: {path}; 2 of 2 scenario(s) judged by the invariants only" in out
    for scenario in result["scenarios"]:
        assert scenario["repro"].endswith(f"--services {path}")
        assert any(f"--services {path} changed its services" in n for n in scenario["notes"])
        assert not [v for v in scenario["violations"] if v["invariant"].startswith("EXP-")]
    # the report re-checks the traces: the note agrees with them (their headers hold no expectation) ...
    assert main(["report", str(tmp_path / "p.json"), "--out", str(tmp_path / "rep")]) == 0
    assert "judged by the invariants only" in (tmp_path / "rep" / "scenarios" / f"{ids[0]}.html").read_text()
    # ... and the same note on a run that kept its expectations is refused as a claim its trace denies
    main(argv + ["--json", str(tmp_path / "own.json")])
    own = json.loads((tmp_path / "own.json").read_text())
    own["scenarios"][0]["notes"].append(result["scenarios"][0]["notes"][-1])
    (tmp_path / "own.json").write_text(json.dumps(own))
    assert main(["report", str(tmp_path / "own.json"), "--out", str(tmp_path / "rep2")]) == 3
    capsys.readouterr()
    assert main(["run", ids[0], "--services", str(path), "--out", str(tmp_path / "r")]) in (0, 1, 2)
    assert f"--services {path} changed its services" in capsys.readouterr().out

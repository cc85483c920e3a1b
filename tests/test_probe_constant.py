"""``crashlab probe`` writes no field from answers that contradict each other (docs/probe.md, "Which
answers decide a field"): an endpoint that gives the same 200 to everything (a stub, a mock, a cache,
a wrong route) answers a new key with the first key's reference, reports a key never sent found and
releases what was never made. Such answers are no evidence of deduplication by key, of a read by key
or of compensation. A local server on 127.0.0.1 (started and stopped by each test) plays it."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crashlab.cli import main  # noqa: E402
from crashlab.probe.client import Exchange  # noqa: E402
from crashlab.probe.interpret import interpret  # noqa: E402
from crashlab.probe.mapping import load_map  # noqa: E402
from crashlab.probe.plan import Observed  # noqa: E402
from crashlab.probe.profile import load_profile  # noqa: E402
from test_probe import MAP, calls, left_behind, scenario, serve  # noqa: E402,F401
from test_probe_refusals import EARLIER, Scripted, _effect_only  # noqa: E402

EFFECT = {"ref": "R-1", "replayed": False}
READ = {"found": True, "record": {"ref": "R-1"}, "records": [{"ref": "R-1"}], "as_of": 0, "in_flight": False}
ONE_BODY = {**EFFECT, **READ}       # the same body for every request
ANSWERS: dict[str, Callable[[str, str], tuple[int, dict]]] = {
    "one body": lambda method, path: (200, ONE_BODY),
    "per route": lambda method, path: (200, READ if method == "GET" else
                                       {"ref": "R-1", "status": "released"} if path.endswith("/release") else EFFECT),
}
CLAIMS = ("idempotency: key_only", "lookup: by_key", "compensation: True", "error_replay: False", "profile (")


def _probe(answer, mapping: Path, out: Path, capsys) -> tuple[int, str, str, list[str]]:
    """The probe against a constant server: (exit code, out, err, requests the server got)."""
    server = Scripted(lambda method, path, n: answer(method, path))
    try:
        code = main(["probe", server.url, "--map", str(mapping), "--execute", "--wait", "100ms",
                     "--timeout", "5", "--out", str(out)])
    finally:
        server.close()
    printed = capsys.readouterr()
    return code, printed.out, printed.err, server.requests


@pytest.mark.parametrize("kind", list(ANSWERS))
def test_a_constant_endpoint_gets_no_profile_from_the_full_map(kind, tmp_path, capsys):
    """The auditor's case: 200 with the same reference to everything made 'idempotency: key_only',
    'lookup: by_key' and 'compensation: true' with exit 0. The key never sent (#6) is reported found:
    the read does not look at the key, so the probe stops there and writes nothing."""
    out = tmp_path / "p.yaml"
    out.write_text(EARLIER)
    code, printed, err, sent = _probe(ANSWERS[kind], MAP, out, capsys)
    assert code == 3, printed + err
    assert out.read_text() == EARLIER                                      # neither written nor removed
    assert err.count("\n") == 1 and "Traceback" not in err and "no profile was written" in err, err
    assert "#6 GET /reservation/lookup key crashlab-probe-" in err and "-k0 -> 200, found R-1" in err, err
    assert "a key the probe never sent was reported found" in err, err
    for claim in CLAIMS:
        assert claim not in printed, claim
    # the plan stopped at the unknown key's read; only the release of the one reference named followed
    assert len(sent) == 7 and sent[-1] == "POST /w/x/reservation/release" and "residue: none" in printed


def test_a_constant_endpoint_gets_no_profile_from_an_effect_only_map(tmp_path, capsys):
    """With the effect alone: the failing intent under a new key (#6) is answered with the reference
    the first key's request got (#1): the endpoint reads neither the key nor the intent."""
    out = tmp_path / "p.yaml"
    code, printed, err, sent = _probe(ANSWERS["per route"], _effect_only(tmp_path), out, capsys)
    assert code == 3, printed + err
    assert not out.exists() and err.count("\n") == 1 and "no profile was written" in err, err
    assert "#6 POST /reservation/reserve key crashlab-probe-" in err and "-k3 -> 200, ref R-1" in err, err
    assert "#1 POST /reservation/reserve key crashlab-probe-" in err and "another intent" in err, err
    for claim in CLAIMS + ("idempotency: none",):
        assert claim not in printed, claim
    assert len(sent) == 6 and "residue: R-1" in printed          # no release is mapped: the effect is listed


def _effect_and_release(tmp_path: Path) -> Path:
    """The sandbox map with the effect and the release only, and no failing intent: nothing in the
    answers shows the endpoint ignores the request outright, only that they contradict each other."""
    doc = yaml.safe_load(MAP.read_text())
    doc["requests"] = {"effect": doc["requests"]["effect"], "release": doc["requests"]["release"]}
    doc.pop("failing")
    for name in ("found", "found_ref", "in_flight", "as_of", "records", "record_ref"):
        doc["answers"].pop(name)
    path = tmp_path / "effect-release.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_answers_that_contradict_each_other_leave_their_fields_untested(tmp_path, capsys):
    """A new key with the same intent (#4, #5 at once) got the first key's reference, and a release of
    a reference the probe made up succeeded: neither deduplication by key nor compensation is shown.
    The profile declares nothing, and each field's evidence names the answers that disagree."""
    out = tmp_path / "p.yaml"
    code, printed, err, sent = _probe(ANSWERS["per route"], _effect_and_release(tmp_path), out, capsys)
    assert code == 0 and out.exists(), printed + err
    assert load_profile(out) == {"reservation": {}}
    for claim in CLAIMS[:-1] + ("idempotency: none", "compensation: False"):
        assert claim not in printed, claim
    evidence = yaml.safe_load(out.read_text())["evidence"]["reservation"]
    idem, comp = evidence["idempotency"]["untested"], evidence["compensation"]["untested"]
    assert "#1 POST /reservation/reserve key crashlab-probe-" in idem and "-k2 -> 200, ref R-1" in idem, idem
    assert "contradict each other" in idem and "check" in idem
    assert "POST /reservation/release key crashlab-probe-" in comp and "never made" in comp, comp
    assert "contradict each other" in comp and "check" in comp
    assert sent.count("POST /w/x/reservation/release") == 2 and "residue: none" in printed


def _constant_observed(*, unknown_found: bool = True, failing: bool = True) -> Observed:
    """What the plan would see from a constant endpoint if nothing stopped it."""
    obs = Observed(probe_id="crashlab-probe-x", keys={}, intents={}, wait_ms=0)

    def ex(n, step, key="k1", method="POST", path="/reservation/reserve", body=EFFECT):
        return Exchange(n, step, method, path, f"crashlab-probe-x-{key}", 200, dict(body))
    read = ex(4, "read", method="GET", path="/reservation/lookup", body=READ)
    unknown = ex(6, "unknown", "k0", "GET", "/reservation/lookup", READ if unknown_found else {**READ, "found": False})
    obs.steps = {"first": [ex(1, "first")], "again": [ex(2, "again")], "changed": [ex(3, "changed")],
                 "read": [read], "search": [Exchange(5, "search", "GET", "/reservation/search", None, 200, READ)],
                 "unknown": [unknown], "race": [ex(7, "race", "k2"), ex(8, "race", "k2")]}
    if failing:
        obs.steps.update(error=[ex(9, "error", "k3")], after_error=[ex(10, "after_error", "k3")])
    obs.steps.update(midway=[ex(11, "midway")], later=[ex(12, "later")])
    obs.times = {s: (0.0, 0.0) for s in obs.steps}
    obs.effects = {"R-1": "first"}
    obs.releases = {"R-1": ex(13, "release", "release-1", path="/reservation/release")}
    obs.unmade = ex(14, "unmade", "release-0", path="/reservation/release")
    return obs


@pytest.mark.parametrize("unknown_found,failing", [(True, True), (False, True), (True, False), (False, False)])
def test_interpret_writes_no_field_from_a_constant_endpoint(unknown_found, failing):
    """Beside the stop: read on its own, such answers decide no field, and the evidence lines name
    the answers that disagree. Without a key never sent reported found or the failing intent answered
    with the first reference, nothing says the read ignores its key: it found k1's effect and not k0."""
    profile = interpret(load_map(MAP), _constant_observed(unknown_found=unknown_found, failing=failing))
    plain = unknown_found or failing
    assert profile.services() == ({} if plain else {"lookup": "by_key", "consistency": "strong"})
    for name in ("idempotency", "compensation", "retention_ms", "error_replay") + (("lookup",) if plain else ()):
        assert profile.fields[name].status == "untested", (name, profile.fields[name].text)
    text = profile.fields["idempotency"].text
    assert "#1 POST /reservation/reserve" in text and "contradict" in text, text
    assert "#14 POST /reservation/release" in profile.fields["compensation"].text
    for name in ("concurrency", "replay_marker") + (("unknown_key",) if plain else ()):
        assert name not in profile.notes or profile.notes[name].status == "untested", name


def test_a_release_of_what_was_never_made_that_succeeds_leaves_compensation_untested():
    """A release path that answers 200 to anything (a stub) beside an effect path that deduplicates."""
    obs = _constant_observed(unknown_found=False, failing=False)
    del obs.steps["race"]                                  # no new key: nothing contradicts the effects
    profile = interpret(load_map(MAP), obs)
    assert profile.fields["idempotency"].value == "key_only"
    assert profile.fields["compensation"].status == "untested"
    assert "#13 POST /reservation/release" in profile.fields["compensation"].text
    assert "#14 POST /reservation/release" in profile.fields["compensation"].text
    obs.unmade = Exchange(14, "unmade", "POST", "/reservation/release", "k", 404, {"error": {"code": "not_found"}})
    assert interpret(load_map(MAP), obs).fields["compensation"].value is True


def test_a_genuine_service_refuses_the_release_of_a_reference_never_made(serve, tmp_path, capsys):
    """The one request the check adds: after a release succeeded, one release of a reference the
    service never named, which the sandbox refuses (404 not_found); the profile is the one before."""
    sb = serve(scenario(idempotency="semantic", lookup="by_key"))
    out = tmp_path / "p.yaml"
    code = main(["probe", sb.root + "/w/run-1.w1", "--map", str(MAP), "--execute", "--wait", "200ms",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert load_profile(out)["reservation"]["compensation"] is True
    unmade = [line for line in printed.splitlines() if line.strip().startswith("unmade") and "->" in line]
    assert len(unmade) == 1 and "-> 404 not_found" in unmade[0], printed
    assert left_behind(sb) == [] and len(calls(sb)) <= 20

"""``crashlab probe`` never writes a profile field from answers that refuse the request for reasons
unrelated to the behaviour asked about (docs/probe.md, "Answers that are not the service's own"
and "Which answers decide a field"): an endpoint that answers the first request and then 401, 410,
400 or 404 to everything is not a service that finds nothing, cannot compensate and replays its
errors. A local server on 127.0.0.1 (started and stopped by each test) plays such an endpoint."""
from __future__ import annotations

import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crashlab.cli import main  # noqa: E402
from crashlab.probe.client import Exchange  # noqa: E402
from crashlab.probe.evidence import judge  # noqa: E402
from crashlab.probe.interpret import interpret  # noqa: E402
from crashlab.probe.mapping import load_map  # noqa: E402
from crashlab.probe.plan import Observed  # noqa: E402
from crashlab.probe.profile import load_profile  # noqa: E402
from crashlab.scenario.loader import from_dict  # noqa: E402
from test_probe import MAP, NOTIFY_MAP, PROFILES, calls, left_behind, scenario, serve  # noqa: E402,F401

EARLIER = "# a profile from an earlier probe\n"
OK = (200, {"ref": "R-1", "replayed": False})


class Scripted:
    """A local HTTP server on 127.0.0.1 answering each request with ``answer(method, path, n)`` (status,
    JSON body; ``n`` counts the requests from 1), whatever the request says. It records what it was
    sent; ``close`` checks that nothing listens on its port any more."""

    def __init__(self, answer: Callable[[str, str, int], tuple[int, dict]]) -> None:
        server = self
        self.requests: list[str] = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            timeout = 10                  # a connection that stalls is dropped: the test stays bounded

            def log_message(self, *args) -> None:
                return

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                with lock:
                    server.requests.append(f"{self.command} {path}")
                    n = len(server.requests)
                status, body = answer(self.command, path, n)
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.port}/w/x"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()
        with pytest.raises(OSError):            # nothing listens there any more
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()


def _probe(then: tuple[int, dict], mapping: Path, out: Path, capsys) -> tuple[int, str, str, list[str]]:
    """The probe against a server answering 200 once, then ``then``: (exit code, out, err, requests)."""
    server = Scripted(lambda method, path, n: OK if n == 1 else then)   # 200 once, then ``then``
    try:
        code = main(["probe", server.url, "--map", str(mapping), "--execute", "--wait", "100ms",
                     "--timeout", "5", "--out", str(out)])
    finally:
        server.close()
    printed = capsys.readouterr()
    return code, printed.out, printed.err, server.requests


def _effect_only(tmp_path: Path) -> Path:
    """The sandbox map with only the effect request (no read, no search, no release)."""
    doc = yaml.safe_load(MAP.read_text())
    doc["requests"] = {"effect": doc["requests"]["effect"]}
    for name in ("found", "found_ref", "in_flight", "as_of", "records", "record_ref"):
        doc["answers"].pop(name)
    path = tmp_path / "effect-only.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


REFUSALS = {   # what every request after the first gets -> what the one-line error must say
    "401": ((401, {"error": {"code": "unauthorized"}}), "401 unauthorized: an authentication failure"),
    "410": ((410, {"error": {"code": "gone"}}), "410 gone: the endpoint says the resource is gone"),
    "400": ((400, {"error": {"code": "bad_request"}}), "400 bad_request: the intent the service accepted at #1"),
}


@pytest.mark.parametrize("kind", list(REFUSALS))
def test_a_refusal_after_the_first_answer_stops_the_probe_and_writes_no_profile(kind, tmp_path, capsys):
    """The auditor's case: 200, then 401 (410, 400) to everything made 'lookup: none', 'compensation:
    false' and 'error_replay: true', each filed as observed, with exit 1."""
    then, says = REFUSALS[kind]
    out = tmp_path / "p.yaml"
    out.write_text(EARLIER)
    code, printed, err, sent = _probe(then, MAP, out, capsys)
    assert code == 3, printed + err
    assert out.read_text() == EARLIER                                  # neither written nor removed
    assert "#2 POST /reservation/reserve key crashlab-probe-" in err and says in err, err
    assert "no profile was written" in err and err.count("\n") == 1 and "Traceback" not in err
    for claim in ("lookup: none", "compensation: False", "error_replay: True", "profile ("):
        assert claim not in printed
    # the plan stopped at the refusal; only the release of the effect the first answer named followed
    assert sent[:2] == ["POST /w/x/reservation/reserve"] * 2 and sent[2:] == ["POST /w/x/reservation/release"]
    assert "residue: R-1" in printed


def test_an_effect_route_answering_404_after_a_success_stops_the_probe(tmp_path, capsys):
    """The auditor's second case: a map with only 'effect', 200 then 404 to everything: the 'every
    request 404' case docs/probe.md warns about wrote 'error_replay: true'."""
    out = tmp_path / "p.yaml"
    code, printed, err, sent = _probe((404, {"error": {"code": "not_found"}}), _effect_only(tmp_path), out, capsys)
    assert code == 3, printed + err
    assert not out.exists() and "error_replay" not in printed
    assert "#2 POST /reservation/reserve key crashlab-probe-" in err and "-> 404 not_found" in err
    assert "the intent the service accepted at #1" in err and "no profile was written" in err
    assert err.count("\n") == 1 and len(sent) == 2


def test_no_profile_from_refusals_reaches_a_run(tmp_path, capsys):
    """The auditor's third case: `crashlab run matrix-ambiguous-effect --services p.yaml` took the
    profile, dropped the scenario's expectations and passed."""
    out = tmp_path / "p.yaml"
    code, *_ = _probe((401, {"error": {"code": "unauthorized"}}), MAP, out, capsys)
    assert code == 3 and not out.exists()
    assert main(["run", "matrix-ambiguous-effect", "--services", str(out), "--out", str(tmp_path / "o")]) == 3
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("status,code", [(503, "unavailable"), (429, "throttled")])
def test_answers_that_decide_nothing_leave_their_fields_untested_with_a_line(status, code, tmp_path, capsys):
    """5xx or 429 to everything after the first is the service's (or its gateway's) own answer, so the
    probe goes on, but no field is decided by it: the profile declares nothing, and each field's
    evidence names the request, the status and what to check."""
    out = tmp_path / "p.yaml"
    rc, printed, err, _ = _probe((status, {"error": {"code": code}}), MAP, out, capsys)
    assert rc == 1 and out.exists(), printed + err
    assert load_profile(out) == {"reservation": {}}
    evidence = yaml.safe_load(out.read_text())["evidence"]["reservation"]
    for name in ("lookup", "compensation", "error_replay"):
        assert "untested" in evidence[name], (name, evidence[name])
        assert f"-> {status} {code}" in evidence[name]["untested"], (name, evidence[name])
    assert "GET /reservation/lookup" in evidence["lookup"]["untested"]
    assert "check" in evidence["lookup"]["untested"] and "check" in evidence["compensation"]["untested"]
    assert "untested" in evidence["unknown_key"]


def _refused_after_first(status: int, code: str) -> Observed:
    """What the plan saw from an endpoint answering 200 once, then ``status`` to everything."""
    obs = Observed(probe_id="crashlab-probe-x", keys={}, intents={}, wait_ms=0)
    no = {"error": {"code": code}}

    def ex(n, step, method="POST", path="/reservation/reserve", key="k1"):
        return Exchange(n, step, method, path, key, status, no)
    obs.steps = {"first": [Exchange(1, "first", "POST", "/reservation/reserve", "k1", 200, {"ref": "R-1"})],
                 "again": [ex(2, "again")], "changed": [ex(3, "changed")],
                 "read": [ex(4, "read", "GET", "/reservation/lookup")],
                 "search": [ex(5, "search", "GET", "/reservation/search", None)],
                 "unknown": [ex(6, "unknown", "GET", "/reservation/lookup", "k0")],
                 "race": [ex(7, "race", key="k2"), ex(8, "race", key="k2")],
                 "error": [ex(9, "error", key="k3")], "after_error": [ex(10, "after_error", key="k3")]}
    obs.releases = {"R-1": ex(11, "release", path="/reservation/release", key="k-release-1")}
    return obs


@pytest.mark.parametrize("status,code", [(401, "unauthorized"), (403, "forbidden"), (410, "gone"),
                                         (400, "bad_request"), (404, "not_found"), (503, "unavailable")])
def test_interpret_writes_no_field_from_refusals(status, code):
    """Beside the stop: read on its own, such answers decide no field (lookup, compensation,
    error_replay), and the unknown key's note is not filed as observed."""
    profile = interpret(load_map(MAP), _refused_after_first(status, code))
    assert profile.services() == {}, profile.services()
    for name in ("lookup", "compensation", "error_replay"):
        finding = profile.fields[name]
        assert finding.status == "untested" and f"-> {status} {code}" in finding.text, (name, finding.text)
    assert profile.notes["unknown_key"].status == "untested"


def test_which_answers_stop_the_probe():
    pmap = load_map(MAP)

    def ex(status, code, method="POST"):
        return Exchange(2, "s", method, "/r", "k", status, {"error": {"code": code}})
    served = {"effect", "lookup", "release"}
    stop = [("again", "effect", 401, "unauthorized"), ("read", "lookup", 403, "forbidden"),
            ("release", "release", 401, "unauthorized"), ("changed", "effect", 410, "gone"),
            ("again", "effect", 404, "not_found"), ("race", "effect", 400, "bad_request"),
            ("later", "effect", 403, "permission_denied"), ("error", "effect", 401, "unauthorized"),
            ("after_error", "effect", 404, "not_found")]
    for step, request, status, code in stop:
        assert judge(pmap, step, request, ex(status, code), set(served)) is not None, (step, status)
    own = [("again", "effect", 409, "conflict_in_flight"), ("again", "effect", 422, "intent_mismatch"),
           ("changed", "effect", 400, "validation_failed"), ("changed", "effect", 404, "not_found"),
           ("error", "effect", 403, "permission_denied"), ("error", "effect", 404, "not_found"),
           ("error", "effect", 402, "card_declined"), ("release", "release", 400, "bad_request"),
           ("again", "effect", 429, "throttled"), ("read", "lookup", 503, "unavailable"),
           ("after_error", "effect", 422, "intent_mismatch")]
    for step, request, status, code in own:
        assert judge(pmap, step, request, ex(status, code), set(served)) is None, (step, status)
    # the failing intent's answer replayed under its key is the service's own, even a 403
    err = ex(403, "permission_denied")
    assert judge(pmap, "after_error", "effect", ex(403, "permission_denied"), set(served), error=err) is None
    assert judge(pmap, "after_error", "effect", ex(403, "forbidden"), set(served), error=err) is not None


# ----------------------------------------------------------------------------- a genuine service
@pytest.mark.parametrize("served,expected", PROFILES, ids=["semantic-by_key", "key_only-search", "none-none",
                                                          "no-release", "eventual", "semantic-errors",
                                                          "key_only-errors"])
def test_a_genuine_service_still_yields_its_profile(serve, served, expected, tmp_path, capsys):
    """The sandbox's refusals (422 for a changed intent, 409 in flight, 403 for the failing intent and its
    replay, 400 for a release it cannot make) are the service's own: the written profile is the one
    tests/test_probe.py expects, and the probe's exit status says nothing was left but the residue."""
    sb = serve(scenario(**served))
    out = tmp_path / "p.yaml"
    code = main(["probe", sb.root + "/w/run-1.w1", "--map", str(MAP), "--execute", "--wait", "400ms",
                 "--out", str(out)])
    printed = capsys.readouterr()
    assert code == (0 if served.get("compensation", True) else 1), printed.out + printed.err
    got = load_profile(out)["reservation"]
    got.pop("lag", None)
    assert got == expected
    evidence = yaml.safe_load(out.read_text())["evidence"]["reservation"]
    assert all("observed" in evidence[k] for k in expected)
    assert len(calls(sb)) <= 20 and (left_behind(sb) == [] or not served.get("compensation", True))


@pytest.mark.parametrize("mode", ["semantic", "key_only", "none"])
def test_a_genuine_notification_service_still_yields_its_profile(serve, mode, tmp_path, capsys):
    sb = serve(from_dict({"id": "n", "title": "n", "clock": {"origin": "10:00", "horizon": "23:00"},
                          "services": {"notification": {"idempotency": mode, "retention": "24h"}},
                          "runs": [{"id": "run-1", "service": "notification", "intent": {"to": "x"}}]}))
    mapping = tmp_path / "notify.yaml"
    mapping.write_text(NOTIFY_MAP)
    out = tmp_path / "p.yaml"
    code = main(["probe", sb.root + "/w/run-1.w1", "--map", str(mapping), "--execute", "--wait", "200ms",
                 "--out", str(out)])
    capsys.readouterr()
    assert code == 1 and load_profile(out) == {"notification": {"idempotency": mode}}   # messages stay: residue

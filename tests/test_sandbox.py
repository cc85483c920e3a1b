"""The sandbox over a real loopback socket: the services' semantics, the HTTP mapping and every
socket-level fault, checked with http.client (no sleeps asserted, no wall-clock figures)."""
from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from crashlab.sandbox import Sandbox
from crashlab.scenario.loader import from_dict

INTENT = {"tenant": "T-1", "incident": "I-82", "part": "P-204", "slot": "S-19", "technician": "TECH-4",
          "quantity": 1, "principal": "U-7"}


def scenario(profile=None, faults=(), events=(), horizon="10:10"):
    return from_dict({"id": "sandbox-test", "title": "sandbox test", "seed": 1,
                      "clock": {"origin": "10:00", "horizon": horizon},
                      "services": {"reservation": dict(profile or {})},
                      "runs": [{"id": "run-1", "intent": INTENT, "approval": {"mode": "none"}}],
                      "faults": list(faults), "events": list(events)})


class Client:
    def __init__(self, sb: Sandbox, worker="run-1.w1", timeout=5.0):
        self.port = sb.httpd.server_address[1]
        self.base = f"/w/{worker}"
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def post(self, path, body, key=None):
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        self.conn.request("POST", self.base + path, json.dumps(body), headers)
        return self._answer()

    def get(self, path):
        self.conn.request("GET", self.base + path)
        return self._answer()

    def _answer(self):
        resp = self.conn.getresponse()
        data = json.loads(resp.read() or b"null")
        return resp.status, data, dict(resp.getheaders())


def kinds(sb):
    return [e["kind"] for e in sb.trace.events]


def test_semantic_keys_replay_and_refuse_a_changed_intent(serve):
    sb = serve(scenario())
    c = Client(sb)
    s1, first, _ = c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    s2, again, _ = c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    s3, other, _ = c.post("/reservation/reserve", {"intent": {**INTENT, "quantity": 2}}, key="k1")
    assert (s1, s2, s3) == (200, 200, 422)
    assert again["replayed"] and again["ref"] == first["ref"]
    assert other["error"]["code"] == "intent_mismatch" and other["error"]["definite"] is True
    assert kinds(sb).count("effect") == 1 and "replayed" in kinds(sb) and "refused" in kinds(sb)
    status, found, _ = c.get("/reservation/lookup?key=k1")
    assert status == 200 and found["found"] and found["record"]["ref"] == first["ref"]
    status, hits, _ = c.get("/reservation/search?incident=I-82&slot=S-19")
    assert status == 200 and [r["ref"] for r in hits["records"]] == [first["ref"]]
    status, agg, _ = c.get("/reservation/aggregate?part=P-204")
    assert status == 200 and agg["available"] == 9


def test_key_only_and_none_modes(serve):
    sb = serve(scenario({"idempotency": "key_only"}))
    c = Client(sb)
    _, a, _ = c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    _, b, _ = c.post("/reservation/reserve", {"intent": {**INTENT, "quantity": 2}}, key="k1")
    assert b["replayed"] and b["ref"] == a["ref"]      # key_only: no fingerprint
    sb2 = serve(scenario({"idempotency": "none", "lookup": "none"}))
    c2 = Client(sb2)
    _, x, _ = c2.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    _, y, _ = c2.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    assert x["ref"] != y["ref"] and kinds(sb2).count("effect") == 2   # none: a resend duplicates
    status, err, _ = c2.get("/reservation/lookup?key=k1")
    assert status == 400 and err["error"]["code"] == "bad_request"


def test_describe_answers_scaled_durations(serve):
    sb = serve(scenario({"timeout_ms": 3000}), scale=100.0)
    status, d, _ = Client(sb).get("/reservation")
    assert status == 200 and d["timeout_ms"] == 30 and d["time_scale"] == 100.0 and d["idempotency"] == "semantic"


def test_every_answer_carries_the_scenario_clock(serve):
    sb = serve(scenario({}), scale=100.0)
    c = Client(sb)
    _, d, first = c.get("/reservation")
    _, rec, second = c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    before, after = int(first["Crashlab-Now"]), int(second["Crashlab-Now"])
    assert 0 <= before <= rec["committed_at"] <= after <= sb.clock.now()


def test_throttled_answers_429_with_retry_after(serve):
    sb = serve(scenario(faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                 "fault": "throttled", "delay": "2s"}]))
    c = Client(sb)
    status, err, headers = c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    assert status == 429 and headers["Retry-After"] == "1" and headers["Retry-After-Ms"] == "20"
    assert err["error"]["details"]["retry_after_ms"] == 20 and "effect" not in kinds(sb)
    # the trace keeps the scenario's 2 s (CLS-02 compares it with scenario time), the worker is told 20 real ms
    traced = [e for e in sb.trace.events if e["kind"] == "result" and not e["ok"]]
    assert traced[0]["error"]["details"]["retry_after_ms"] == 2000
    assert c.post("/reservation/reserve", {"intent": INTENT}, key="k1")[0] == 200


def test_server_error_after_commit_is_502_and_committed(serve):
    sb = serve(scenario({"idempotency": "none", "lookup": "none"},
                        faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                 "fault": "server_error_after"}]))
    status, err, _ = Client(sb).post("/reservation/reserve", {"intent": INTENT})
    assert status == 502 and err["error"]["definite"] is False
    assert kinds(sb).count("effect") == 1 and "server_error" in kinds(sb)


def test_server_error_before_commit_is_503_and_nothing_committed(serve):
    sb = serve(scenario(faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                 "fault": "server_error_before"}]))
    status, _, _ = Client(sb).post("/reservation/reserve", {"intent": INTENT}, key="k1")
    assert status == 503 and "effect" not in kinds(sb)


def test_lost_response_closes_the_connection_after_the_commit(serve):
    sb = serve(scenario(faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                 "fault": "lost_response"}]))
    c = Client(sb)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    assert kinds(sb).count("effect") == 1 and "response_lost" in kinds(sb)
    result = [e for e in sb.trace.events if e["kind"] == "result"][-1]
    assert result["ok"] is False and result["error"]["definite"] is False
    status, found, _ = Client(sb).get("/reservation/lookup?key=k1")
    assert found["found"] is True


def test_late_arrival_holds_then_commits_and_meets_409(serve):
    sb = serve(scenario(faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                 "fault": "late_arrival", "delay": "20s"}]), scale=100.0)
    c = Client(sb, timeout=5.0)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, socket.timeout)):
        c.post("/reservation/reserve", {"intent": INTENT}, key="k1")   # held 30 ms (3 s / 100), closed
    assert "effect" not in kinds(sb) and sb.pending == 1
    c2 = Client(sb)
    status, look, _ = c2.get("/reservation/lookup?key=k1")
    assert look["found"] is False and look["in_flight"] is True
    status, err, _ = c2.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    assert status == 409 and err["error"]["code"] == "conflict_in_flight"
    deadline = time.monotonic() + 10
    while sb.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sb.pending == 0 and "late_arrival" in kinds(sb) and kinds(sb).count("effect") == 1



def _callbacks(c, want, deadline_s=10.0):
    deadline = time.monotonic() + deadline_s
    while True:
        status, box, _ = c.get("/inbox?after_seq=0")
        found = [e for e in box["events"] if e["type"] == "callback"]
        if len(found) >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.005)


@pytest.mark.parametrize("fault", ["lost_response", "server_error_after", "late_arrival", "duplicate_delivery"])
def test_a_committed_request_sends_its_callback_whatever_becomes_of_the_answer(serve, fault):
    """The simulator's rule (services.callback_delay): one completion callback per new commit, also
    when the answer is lost, a 5xx follows the commit, the request lands late, or a duplicate lands
    on a keyless service; the sandbox applies the same rule."""
    keyless = fault == "duplicate_delivery"
    profile = {"callback_delay": "1s", **({"idempotency": "none", "lookup": "none"} if keyless else {})}
    sb = serve(scenario(profile=profile, faults=[{"match": {"port": "reservation", "op": "reserve", "nth": 1},
                                                  "fault": fault, "delay": "2s"}]), scale=100.0)
    c = Client(sb, timeout=5.0)
    try:
        c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    except (http.client.RemoteDisconnected, ConnectionError, socket.timeout):
        pass
    commits = 2 if keyless else 1
    found = _callbacks(Client(sb), commits)
    assert len(found) == commits and kinds(sb).count("effect") == commits


def test_a_replayed_request_sends_no_second_callback(serve):
    sb = serve(scenario(profile={"callback_delay": "1s"}), scale=100.0)
    c = Client(sb)
    c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    status, again, _ = c.post("/reservation/reserve", {"intent": INTENT}, key="k1")
    assert status == 200 and again["replayed"] is True
    time.sleep(0.1)   # ten times the scaled callback delay: a second callback would have landed
    assert len(_callbacks(c, 1)) == 1

def test_inbox_delivers_intake_and_scenario_events(serve):
    sb = serve(scenario(events=[{"at": "10:00:01", "type": "cancel", "run": "run-1"}]), scale=1000.0)
    c = Client(sb)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        status, box, _ = c.get("/inbox?after_seq=0")
        if len(box["events"]) == 2:
            break
        time.sleep(0.005)
    assert [e["type"] for e in box["events"]] == ["intake", "cancel"]
    assert box["events"][0]["payload"]["intent"] == INTENT


def test_bad_requests_get_clear_errors(serve):
    sb = serve(scenario())
    c = Client(sb)
    assert c.get("/nowhere/x")[0] == 404
    status, err, _ = Client(sb, worker="nobody").get("/reservation")
    assert status == 404 and "base URL" in err["error"]["message"]
    c.conn.request("POST", "/w/run-1.w1/reservation/reserve", b"[1,2", {"Content-Length": "4"})
    resp = c.conn.getresponse()
    assert resp.status == 400 and b"one JSON object" in resp.read()
    assert c.post("/reservation/lookup", {})[0] == 405


def test_the_trace_is_in_the_vocabulary(serve, tmp_path):
    from crashlab.world.trace import read_jsonl, write_jsonl

    sb = serve(scenario())
    Client(sb).post("/reservation/reserve", {"intent": INTENT}, key="k1")
    events = sb.end({"run-1": {"finished": None, "waiting": None, "workers": 0}})
    write_jsonl(events, tmp_path / "t.jsonl")
    assert [e["kind"] for e in read_jsonl(tmp_path / "t.jsonl")][:1] == ["header"]


def test_docs_map_every_route_status_and_fault():
    from pathlib import Path

    from crashlab.sandbox import FAULTS, ROUTES, STATUS

    text = (Path(__file__).resolve().parent.parent / "docs" / "integration.md").read_text()
    for kind, routes in ROUTES.items():
        for op, route in routes.items():
            path = "/{service}" if op == "describe" else f"/{kind}/{op}"
            assert f"`{route.method} {path}" in text, (kind, op)
    for code, status in STATUS.items():
        assert f"`{code}`" in text and str(status) in text, code
    for fault in FAULTS:
        assert f"`{fault}`" in text, fault


def test_sandbox_serve_on_the_command_line(tmp_path):
    import re
    import signal
    import subprocess
    import sys

    from crashlab.world.trace import read_jsonl

    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "crashlab", "sandbox", "serve", "matrix-ambiguous-effect",
                             "--time-scale", "100", "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stdout.readline()
        port = int(re.search(r"127\.0\.0\.1:(\d+)", first).group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/w/run-82.w1/reservation/reserve", json.dumps({"intent": INTENT}),
                     {"Idempotency-Key": "k1", "Content-Type": "application/json"})
        assert conn.getresponse().status == 502          # the scenario's fault: 502 after the commit
        conn.close()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    kinds = [e["kind"] for e in read_jsonl(log)]
    assert kinds[0] == "header" and "effect" in kinds and "server_error" in kinds and kinds[-1] == "end"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    bad = subprocess.run([sys.executable, "-m", "crashlab", "sandbox", "serve", "no-such-scenario"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 3 and "Traceback" not in bad.stderr


def test_other_actors_background_traffic_is_the_simulators_and_stops_with_the_sandbox(serve):
    from itertools import islice

    from crashlab.world import transport
    from crashlab.run.runner import run_scenario

    sc = scenario({"background": "1m"}, horizon="10:30")
    sb = serve(sc, scale=6000.0)            # one scenario minute is 10 ms
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with sb.lock:
            got = [e for e in sb.trace.events if e["kind"] == "effect" and e.get("cause") == "other_actor"]
        if len(got) >= 3:
            break
        time.sleep(0.01)
    expected = [args["intent"] for _, args in islice(transport.background(
        transport.named_stream(sc.seed, "background:reservation"), 60_000, ["P-204"]), 3)]
    assert [e["intent"] for e in got[:3]] == expected
    simulated = [e["intent"] for e in run_scenario(sc).events if e["kind"] == "effect" and e["cause"] == "other_actor"]
    assert simulated[:3] == expected          # the simulator sends the same requests
    sb.stop()
    assert not any(t.is_alive() for t in sb._threads)


def test_a_sandbox_without_background_traffic_sends_none(serve):
    sb = serve(scenario(), scale=6000.0)
    time.sleep(0.05)
    with sb.lock:
        assert not [e for e in sb.trace.events if e.get("cause") == "other_actor"] and not sb._threads


def _raw(sb, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", sb.httpd.server_address[1]), timeout=5) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_a_chunked_body_is_read_whole_never_as_an_empty_object(serve):
    sb = serve(scenario())
    body = json.dumps({"intent": INTENT}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:])) + b"0\r\n\r\n"
    answer = _raw(sb, b"POST /w/run-1.w1/reservation/reserve HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
                      b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
    assert answer.startswith(b"HTTP/1.1 200") or answer.startswith(b"HTTP/1.0 200"), answer[:200]
    effects = [e for e in sb.trace.events if e["kind"] == "effect"]
    assert effects and effects[0].get("intent", INTENT)["part"] == INTENT["part"]


@pytest.mark.parametrize("headers, said", [
    (b"Transfer-Encoding: gzip\r\n", b"Transfer-Encoding"),
    (b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", b"Content-Length"),
])
def test_a_body_that_cannot_be_read_is_refused_with_400(serve, headers, said):
    sb = serve(scenario())
    answer = _raw(sb, b"POST /w/run-1.w1/reservation/reserve HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
                      + headers + b"\r\nzzzzz")
    assert b" 400 " in answer.split(b"\r\n", 1)[0] and said in answer
    assert "effect" not in kinds(sb)


def test_a_malformed_chunk_is_refused_with_400(serve):
    sb = serve(scenario())
    answer = _raw(sb, b"POST /w/run-1.w1/reservation/reserve HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\nnot-hex\r\n")
    assert b" 400 " in answer.split(b"\r\n", 1)[0] and b"malformed" in answer
    assert "effect" not in kinds(sb)

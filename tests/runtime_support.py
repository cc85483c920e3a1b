"""Shared by the durable-runtime tests: run an example under a runtime, find what outlived it."""
from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the plain careful integration worker (examples/integration/worker.py)
WORKER = ROOT / "examples" / "integration" / "worker.py"
KEYLESS_502 = ROOT / "examples" / "integration" / "scenarios" / "keyless-502.yaml"
KEYLESS_CRASH = ROOT / "examples" / "runtimes" / "scenarios" / "keyless-crash-after-commit.yaml"

#: the runtime subset: scenario -> the rules a naive example (no key, no read before a resend) must fail
#: there (the chapter's: a duplicate effect, a second retry owner resending with no read)
NAIVE_FAILS = {
    "integration-keyless-502": {"EFF-01", "RETRY-01"},
    "crash-4-after-commit-before-record": {"RETRY-01"},
    "t2-commit-before-record": {"RETRY-01"},
    "matrix-weak-service": {"EFF-01"},
    "matrix-retry-amplification": {"RETRY-03", "EFF-01"},
}


def subset_scenario(name: str):
    """A scenario of the runtime subset by name (the keyless-502 one from its example file)."""
    from crashlab.scenario.loader import resolve

    return resolve(str(KEYLESS_502) if name == "integration-keyless-502" else name)


def runtime_server(tmp_path_factory, name: str, folder: str):
    """Body of a module-scoped ``server`` fixture: runtime ``name`` started in a fresh folder, yielded
    as (runtime, server, folder), stopped afterwards, and nothing of it left running."""
    from crashlab.runtimes import load

    rt = load(name)
    work = tmp_path_factory.mktemp(folder)
    srv = rt.start(work / "runtime")
    yield rt, srv, work
    srv.stop()
    no_leftovers(str(work))


def example(runtime: str, name: str, out: Path) -> str:
    """The example's worker command; the output folder rides in its command line so leftovers are found."""
    return f"{sys.executable} {ROOT / 'examples' / 'runtimes' / runtime / name}.py --out-marker={out}"


def independent(runtime: str, out: Path) -> str:
    """The worker a stranger wrote for ``runtime`` from README.md and docs/ alone (gallery/independent/)."""
    return f"{sys.executable} {ROOT / 'gallery' / 'independent' / runtime}_worker.py --out-marker={out}"


def alive_with(marker: str) -> list[int]:
    """Live processes whose command line carries ``marker``: workers and servers, not this test process
    and not crashlab itself (``python -m crashlab ...``, whose command line names the folder too)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z" and " -m crashlab " not in cmd:
            found.append(int(pid))
    return found


def no_leftovers(marker: str) -> None:
    deadline = time.monotonic() + 5
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive_with(marker), "a process outlived its run"


def closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return False
    except OSError:
        return True


def statuses(outcome) -> dict:
    return {line.invariant: line.status for line in outcome.card.lines}


def assert_handed_over_before_the_stale_worker_resumed(outcome) -> None:
    """A stalled run (matrix-lease-loss) passed, its replacement read the key, then the stale worker resumed."""
    from crashlab.world.trace import read_jsonl

    assert outcome.card.verdict == "pass", outcome.card.text()
    events = read_jsonl(outcome.trace)
    resume = next(i for i, e in enumerate(events) if e["kind"] == "resume")
    assert events[resume]["handover"] == "taken"
    read = next(i for i, e in enumerate(events) if e["kind"] == "call" and e["op"] in ("lookup", "search"))
    assert events[read]["worker"] == "run-82/w2" and read < resume


@pytest.fixture
def out(tmp_path):
    """A test's output folder; no process whose command line names it may be left when the test ends."""
    yield tmp_path
    no_leftovers(str(tmp_path))


def careful(out: Path, mistake: str = "") -> str:
    """The plain careful worker's command (``mistake``: ``--mistake=NAME``); the output folder is in its
    command line, so :func:`out` can find any process left behind."""
    return f"{sys.executable} {WORKER} {{url}} {{db}} {mistake} --out-marker={out}".strip()


#: the integration-authority suite: T4 (in the library) and the two approval scenarios beside the plain worker
APPROVAL_WAIT = ROOT / "examples" / "integration" / "scenarios" / "approval-wait.yaml"
APPROVAL_REVOKED = ROOT / "examples" / "integration" / "scenarios" / "approval-revoked.yaml"
AUTHORITY_SUITE = {"t4-approval-wait-crash": "t4-approval-wait-crash", "integration-approval-wait": APPROVAL_WAIT,
                   "integration-approval-revoked": APPROVAL_REVOKED}


def assert_the_approval_story(scenario: str, trace: Path) -> None:
    """What a careful worker does on an integration-authority scenario, read from its trace: it waits as
    WAITING_HUMAN with the approver next while no approval is live, is woken by the grant (its run's second
    worker) and sends only under the approval's proposal hash, asked right before; a revoked approval ends
    the run with nothing sent; with no approval ever given (T4) every worker restores the wait."""
    from crashlab.world.trace import read_jsonl

    events = read_jsonl(trace)
    finishes = [(e["disposition"], e.get("next_owner")) for e in events if e["kind"] == "finish"]
    sends = [e for e in events if e["kind"] == "call" and e.get("op") == "reserve"]
    checks = [e for e in events if e["kind"] == "call" and e.get("port") == "authority" and e.get("op") == "check"]
    assert finishes and finishes[0] == ("WAITING_HUMAN", "approver"), finishes
    if scenario == "t4-approval-wait-crash":
        assert set(finishes) == {("WAITING_HUMAN", "approver")} and not sends, (finishes, sends)
    elif scenario == "integration-approval-wait":
        assert finishes[-1][0] == "SUCCEEDED", finishes
        granted = next(e for e in events if e["kind"] == "approval_granted")
        woken = [e for e in events if e["kind"] == "start" and e["seq"] > granted["seq"]]
        assert woken and woken[0]["number"] == 2, woken
        for send in sends:
            assert send["args"].get("proposal_hash") == granted["proposal_hash"], send["args"]
            asked = [c for c in checks if c["seq"] < send["seq"] and c["worker"] == send["worker"]]
            assert asked, f"reserve #{send['seq']} was sent without asking the authority"
    else:
        assert finishes[-1] == ("FAILED_NO_EFFECT", "approver") and not sends, (finishes, sends)


def approval_outcome(runtime, server, command: str, name: str, out: Path, wall_limit_s: float = 60):
    """A careful example (``command``) on the integration-authority scenario ``name`` (a key of
    :data:`AUTHORITY_SUITE`) under ``runtime``'s started ``server``, asserted to pass and to tell the approval
    story (:func:`assert_the_approval_story`); its outcome. An inconclusive card (a loaded machine: an agent
    worker's slow start against the wall limit) is run once more. ``wall_limit_s``: three agent workers each
    start in seconds on a loaded machine, past the default 30 s."""
    from crashlab.integrate.run import integrate
    from crashlab.scenario.loader import resolve

    scenario = resolve(str(AUTHORITY_SUITE[name]))
    got = integrate(scenario, worker=command, out=out, runtime=runtime, server=server, wall_limit_s=wall_limit_s)
    if got.card.verdict == "inconclusive":
        got = integrate(scenario, worker=command, out=out / "again", runtime=runtime, server=server,
                        wall_limit_s=wall_limit_s)
    assert got.card.verdict == "pass", got.card.text()
    assert_the_approval_story(name, got.trace)
    if name == "integration-approval-wait" and got.card.runtime is not None:
        # the woken worker ran the run's next unit of work: its runtime record is on the card too
        woken = [r for r in got.card.runtime.runs if r.woken]
        assert [r.woken for r in woken] == [1] and woken[0].unit.endswith(".woken-1"), got.card.text()
        assert Path(woken[0].record).is_file() and "woken unit 1" in got.card.text()
    return got

#: Loaded by every worker process through PYTHONPATH (:func:`netlog`): an audit hook (sys.addaudithook)
#: that logs every name lookup and every socket connect or sendto, so a test sees each address a worker
#: reached for. A hook rather than an empty network namespace: the worker must reach the sandbox on the
#: host's 127.0.0.1, which a new namespace's own loopback is not.
SITECUSTOMIZE = '''
import json, os, sys
_LOG = os.environ.get("CRASHLAB_TEST_NETLOG")
def _hook(event, args):
    if event in ("socket.connect", "socket.sendto", "socket.getaddrinfo"):
        where = args[0] if event == "socket.getaddrinfo" else args[1]
        with open(_LOG, "a") as fh:
            fh.write(json.dumps([event, where if isinstance(where, (str, int)) else list(where)]) + "\\n")
if _LOG:
    sys.addaudithook(_hook)
'''


def hook_network(tmp_path: Path, monkeypatch, unset: tuple[str, ...] = (), server=None) -> Path:
    """Load :data:`SITECUSTOMIZE` into every process started from here on; the log it writes. With a
    runtime's ``server``, the log is in its writable folder: under namespaces isolation the one a
    worker may write beside its store and TMPDIR."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "hook"))
    writable = getattr(server, "writable", ())
    log = Path(writable[0]) / f"net-{tmp_path.name}.jsonl" if writable else tmp_path / "net.jsonl"
    monkeypatch.setenv("CRASHLAB_TEST_NETLOG", str(log))
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    return log


def loopback(event: str, where) -> bool:
    host = where if isinstance(where, str) else where[0] if where else None
    if event == "socket.connect" and isinstance(where, str):
        return True                                   # a Unix socket: not the network
    if host in (None, "localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False                                  # a name to resolve: a DNS lookup


def reached(log: Path) -> list[tuple[str, object]]:
    return [tuple(json.loads(line)) for line in log.read_text().splitlines()] if log.exists() else []


def assert_only_loopback(log: Path) -> None:
    """Every worker process reached only for 127.0.0.1, and the hook did see it do so."""
    seen = reached(log)
    assert any(event == "socket.connect" for event, _ in seen), "the audit hook saw no connection at all"
    assert all(loopback(event, where) for event, where in seen), [s for s in seen if not loopback(*s)]


def naive_and_careful(runtime, server, work: Path, examples: Path, scenario, *options: str,
                      names: tuple[str, ...] = ("naive", "careful")) -> dict:
    """The examples of an agent framework (``examples/naive.py`` and ``careful.py``, or those ``names``) on
    one scenario, under ``runtime``'s started ``server``: their cards, by example. The work folder rides in
    each command line, so a process left behind is found."""
    from crashlab.integrate.run import integrate

    cards = {}
    for name in names:
        cmd = " ".join([sys.executable, str(examples / f"{name}.py"), *options, f"--marker={work}"])
        cards[name] = integrate(scenario, worker=cmd, out=work / name / scenario.id, runtime=runtime,
                                server=server).card
    return cards


def failed(card) -> set[str]:
    return {line.invariant for line in card.lines if line.status == "fail"}


def assert_a_missing_package_names_the_extra(monkeypatch, package: str, runtime: str, install: str) -> None:
    """``load(runtime)`` with ``package`` not importable is a UsageError naming the package and ``install``."""
    from crashlab.runtimes import RUNTIMES, load
    from crashlab.vocab.errors import UsageError

    monkeypatch.setitem(sys.modules, package, None)            # import PACKAGE now fails
    monkeypatch.delitem(sys.modules, RUNTIMES[runtime], raising=False)
    with pytest.raises(UsageError) as err:
        load(runtime)
    assert package in str(err.value) and install in str(err.value.hint)


#: T5 and T8 in their integration forms: a deployment that pins the run to the old code (T5), one that
#: migrates a declared schema change, and the compensation whose release needs its own approval (T8)
COMPENSATION = ROOT / "examples" / "integration" / "scenarios" / "compensation-failure.yaml"
DEPLOY_AND_COMPENSATE = {      # scenario -> the rule it is there for, which a careful example must pass
    "t5-incompatible-deployment": "PIN-01",
    "handoff-2-confirmed-schema-change": "MIG-01",
    "integration-compensation-failure": "COMP-01",
}
#: one decision away from passing: the scenario, the careful worker's mistake, the rule it must fail
ONE_MISTAKE = {
    "handoff-2-confirmed-schema-change": ("reads_old_schema", "MIG-01"),
    "integration-compensation-failure": ("release_without_authority", "AUTH-01"),
}


def deploy_outcome(runtime, server, command: str, name: str, out: Path, mistake: str = ""):
    """A careful runtime example (``command``) on the T5 or T8 scenario ``name`` (a key of
    :data:`DEPLOY_AND_COMPENSATE`) under ``runtime``'s started ``server``, the same command as ``--worker`` and
    ``--worker-next`` (``mistake``: ``--mistake=NAME`` planted in the next code, or in the only code on T8);
    its outcome. An inconclusive card (a loaded machine: the old worker wrote no checkpoint before the
    deployment, or a slow start past a window) is run once more."""
    from crashlab.integrate.run import integrate
    from crashlab.scenario.loader import load_file, resolve

    scenario = load_file(COMPENSATION) if name == "integration-compensation-failure" else resolve(name)
    planted = f"{command} --mistake={mistake}" if mistake else command
    worker, worker_next = (planted, None) if name == "integration-compensation-failure" else (command, planted)
    got = None
    for attempt in ("first", "again"):
        got = integrate(scenario, worker=worker, out=out / attempt, runtime=runtime, server=server,
                        worker_next=worker_next)
        if got.card.verdict != "inconclusive":
            break
    no_leftovers(str(out))
    return got


def assert_the_deployment_story(name: str, outcome) -> None:
    """What a careful runtime example does on T5 and T8, read from its trace: the next code pins the run and
    the old code drains it (PINNED naming the old versions, then SUCCEEDED), or migrates the schema-1
    checkpoint (a MIGRATING checkpoint) and confirms once; T8's release is asked its own approval before it
    is sent. The scenario's own rule (PIN-01, MIG-01, COMP-01) and AUTH-01 are judged and pass."""
    from crashlab.world.trace import read_jsonl

    card = outcome.card
    assert card.verdict == "pass", card.text()
    judged = {line.invariant: line.status for line in card.lines}
    assert judged.get(DEPLOY_AND_COMPENSATE[name]) == "pass", card.text()
    events = read_jsonl(outcome.trace)
    finishes = [e["disposition"] for e in events if e["kind"] == "finish"]
    if name == "t5-incompatible-deployment":
        assert finishes[-2:] == ["PINNED", "SUCCEEDED"], finishes
        pinned = next(e for e in events if e["kind"] == "finish" and e["disposition"] == "PINNED")
        assert pinned["packet"]["pinned_env"]["canonicalization_version"] == 1
        starts = [e["env"]["canonicalization_version"] for e in events if e["kind"] == "start"]
        assert starts[-2:] == [2, 1], starts          # the next code pinned it, the old code drained it
    elif name == "handoff-2-confirmed-schema-change":
        assert any(e["kind"] == "checkpoint" and e["state"] == "MIGRATING" for e in events)
        assert sum(1 for e in events if e["kind"] == "effect" and e.get("cause") != "other_actor") == 1
    else:
        assert judged.get("AUTH-01") == "pass", card.text()
        sends = [e for e in events if e["kind"] == "call" and e.get("op") == "release"]
        asked = [e for e in events if e["kind"] == "call" and e.get("op") == "request"
                 and e["args"].get("action") == "release"]
        assert sends and asked and asked[0]["seq"] < sends[0]["seq"], (asked, sends)


def assert_one_mistake_fails(name: str, outcome) -> None:
    """The careful example with the one mistake of :data:`ONE_MISTAKE` fails for that rule."""
    rule = ONE_MISTAKE[name][1]
    judged = {line.invariant: line.status for line in outcome.card.lines}
    assert outcome.card.verdict == "fail" and judged.get(rule) == "fail", outcome.card.text()

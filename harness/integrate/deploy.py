"""Redeployment by the integration supervisor (docs/integration.md, "Deployments").

A scenario's ``deploy`` event changes the code version, as in the simulator's platform: every worker
of a run started after it runs the next code version, the ``--worker-next`` command, told its versions
in its environment (``CRASHLAB_CODE_VERSION``, ``CRASHLAB_SCHEMA_VERSION``, ...: the scenario's ``env``
with every deployment so far). A worker still running the old version when the deployment comes is
stopped as a deployment stops a process: ``SIGTERM`` to its process group, then ``SIGKILL`` after a
grace period (30 s of scenario time, scaled) unless it has exited by then (under namespaces SIGTERM goes
to the processes below bubblewrap). A scenario crash rule that names that worker on a particular call,
or a store failpoint armed in it, says instead how it ends, as it does in the simulator, and the
supervisor leaves it to the rule; a library deployment's restart rule (``{worker: 1, from: T}`` on no
particular call) is what this stop carries out, never a premise of its own. A run the new code
pins (a ``PINNED`` finish naming ``packet.pinned_env``) is drained by the old command with the pinned
versions, at once, as the simulator's platform does.

``crashlab integrate``'s ``--worker-next`` defaults to the ``--worker`` command (crashlab.integrate.cli), so
the command line always redeploys. A caller of ``integrate()`` that gives no next command redeploys nothing:
the event is written to the trace only, the card's MIG-01 and PIN-01 are not judgeable, and the card is
inconclusive, naming the option (:func:`unmet`).
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..scenario.format import DEFAULT_ENV
from ..vocab import events
from ..vocab.compiled import Scenario
from . import workers
from .command import parse_worker

#: The versions a deployment may change, each given to a worker as ``CRASHLAB_<NAME>``.
VERSION_KEYS = tuple(DEFAULT_ENV)
#: Scenario time an old-version worker has between the deployment's SIGTERM and its SIGKILL.
GRACE_MS = 30_000
OPTION = "--worker-next"


def version_env(env: Mapping) -> dict[str, str]:
    """The worker's environment variables for its code's versions: ``CRASHLAB_CODE_VERSION=2`` ..."""
    return {f"CRASHLAB_{key.upper()}": str(env[key]) for key in VERSION_KEYS if key in env}


def versions(data: Mapping) -> dict:
    """The versions a deploy event's data sets (its ``alters`` and ``services`` are not versions)."""
    return {k: v for k, v in data.items() if k in VERSION_KEYS}


def describe(data: Mapping, at: str) -> str:
    """``deploy at 10:05: code_version 2, canonicalization_version 2``."""
    changed = ", ".join(f"{k} {v}" for k, v in versions(data).items()) or "no version"
    return f"deploy at {at}: {changed}"


def restart_rule(rule) -> bool:
    """A library deployment's crash rule for the old worker: ``{worker: N, from: T}`` on no particular call
    ("a deployment restarts the processes: a worker still alive from before it dies here"). The supervisor's
    own stop at the deployment carries it out; it is not a premise of its own (:func:`moot_rules`)."""
    m = rule.match
    return rule.action == "crash" and m.worker is not None and m.from_ms is not None and m.port is None


def named_by_rule(scenario: Scenario, run: str, number: int) -> bool:
    """A scenario crash rule on a particular call names this worker (``{port: run, op: finish, worker: 1}``):
    it says how the old worker ends, and the supervisor leaves it to the rule, as the simulator does (so too
    a worker with a store failpoint armed: the rule says it dies there)."""
    return any(r.action == "crash" and r.match.worker == number and r.match.run in (None, run)
               and r.match.port is not None for r in scenario.rules)


def unmet(scenario: Scenario, worker_next: str | None) -> list[str]:
    """Without ``--worker-next``, one reason per deploy event of the scenario: it was not carried out."""
    if worker_next:
        return []
    return [f"the scenario's {describe(ev.data, _at(scenario, ev))} was not carried out: a deployment needs the "
            f"next code version's worker command ({OPTION} CMD), so MIG-01 and PIN-01 could not be judged"
            for ev in scenario.events if ev.type == "deploy"]


def unmet_migration(scenario: Scenario | None, trace: list[dict]) -> list[str]:
    """A deployment carried out that changed a contract version (schema, canonicalization, policy, capability)
    whose new code never met the old code's state: no worker started with other contract versions than a
    checkpoint its run already held (the old worker wrote none before it was stopped,
    say, on a slow start). Then what the scenario tests (migrate, pin or stop) did not happen."""
    contract = VERSION_KEYS[1:]
    base = dict(scenario.env) if scenario is not None else {}
    if not any(ev.get("kind") == "redeploy" and isinstance(ev.get("env"), dict)
               and any(ev["env"].get(k) != base.get(k) for k in contract) for ev in trace):
        return []                        # no deployment changed a contract version: there is nothing to migrate
    held: dict[str, dict] = {}           # run -> the contract of its latest checkpoint so far
    for ev in trace:
        if ev.get("kind") == "checkpoint" and isinstance(ev.get("checkpoint"), dict):
            held[ev.get("run")] = ev["checkpoint"].get("contract") or {}
        elif ev.get("kind") == "start" and ev.get("run") in held and isinstance(ev.get("env"), dict):
            old = held[ev["run"]]
            if any(k in old and k in ev["env"] and old[k] != ev["env"][k] for k in contract):
                return []
    return ["the deployment was carried out, but no worker of the new code met a checkpoint of the old one (the "
            "old worker had written none when it was stopped: a slow start?), so the migrate, pin or stop the "
            "scenario tests did not happen"]


def _at(scenario: Scenario, ev) -> str:
    return scenario.fmt(ev.at_ms) if ev.anchor is None else f"{ev.anchor} a request"


def moot_rules(scenario: Scenario) -> set:
    """The lines of the scenario's deployment restart rules (:func:`restart_rule`): the deployment stops the
    old worker itself, and one that had ended before it (a run waiting for its approval) has nothing to stop."""
    return {rule.line for rule in scenario.rules if restart_rule(rule)} \
        if any(ev.type == "deploy" for ev in scenario.events) else set()


@dataclass(slots=True)
class Code:
    """One run's code: the versions its next worker runs, and which command."""
    env: dict
    next: bool = False                 # its next worker runs --worker-next
    pinned: dict | None = None         # a PINNED finish's pinned_env: the old command drains the run
    pin_asked: dict | None = None      # the pinned_env of a PINNED finish read, until its worker exits
    stop_by: float | None = None       # time.monotonic(): the deployment's SIGKILL of the old worker
    stopping: str | None = None        # the deployment that is stopping the current worker
    killed: bool = False               # its grace passed: SIGKILL
    current: dict = field(default_factory=dict)   # the versions the current worker runs


class Redeploying:
    """The supervisor's deployments (a mixin of crashlab.integrate.supervisor.Supervisor, which has
    ``scenario``, ``sandbox`` and ``runs``)."""

    def init_deploys(self, worker_next: str | None, *, runtime: bool) -> None:
        self.next_template = parse_worker(worker_next, OPTION, runtime=runtime) if worker_next is not None else None
        self.deploy_queue: list[tuple[dict, int]] = []
        self.deployed_texts: list[str] = []       # the deployments carried out (the trace header's ``deployed``)
        self.codes = {run: Code(env=dict(self.scenario.env)) for run in self.runs}

    def deployed(self, data: dict) -> None:
        """The sandbox's hook, on its thread under its lock: the main loop carries the deployment out."""
        self.deploy_queue.append((data, self.sandbox.clock.now()))

    def code(self, rs) -> tuple[list[str], dict]:
        """The command and versions of the run's next worker: ``--worker`` and the scenario's versions, or
        after a deployment ``--worker-next`` and the deployed ones; a pinned run the old command, pinned."""
        code = self.codes[rs.id]
        if code.pinned is not None:
            code.current = {**code.env, **code.pinned}
            return self.argv_template, dict(code.current)
        code.current = dict(code.env)
        return (self.next_template if code.next and self.next_template else self.argv_template), dict(code.current)

    def deploys(self, now: float) -> None:
        """Carry out the deployments that came (main loop): later workers run the next code; an old-version
        worker still running is sent SIGTERM, and SIGKILL once its grace has passed."""
        sb = self.sandbox
        while self.deploy_queue:
            data, at = self.deploy_queue.pop(0)
            if self.next_template is None:
                continue                    # not carried out: the card says so (unmet)
            self.deployed_texts.append(describe(data, self.scenario.fmt(at)))
            runs, stopping = [], []
            for rs in self.runs.values():
                code = self.codes[rs.id]
                if code.pinned is not None:
                    continue                # pinned to the old code: it keeps it
                code.env.update(versions(data))
                code.next = True
                runs.append(rs.id)
                proc, caller = rs.proc, rs.caller
                if proc is None or proc.poll() is not None or caller is None or code.stopping is not None \
                        or named_by_rule(self.scenario, rs.id, caller.number) or rs.failpoints:
                    continue
                if not workers.terminate(proc, self.in_namespaces):
                    continue
                code.stopping, code.stop_by = self.deployed_texts[-1], now + sb.clock.real_s(GRACE_MS)
                stopping.append(caller.name)
            with sb.lock:
                sb.emit(events.Redeploy, env=dict(self.codes[runs[0]].env) if runs else versions(data), runs=runs,
                        stopping=stopping, grace_ms=GRACE_MS)
        for rs in self.runs.values():
            code = self.codes[rs.id]
            if code.stop_by is not None and now >= code.stop_by:
                code.stop_by, code.killed = None, True
                if rs.proc is not None:
                    workers.kill(rs.proc)   # the main loop reads its exit: redeployed()

    def pinned_by(self, rs, disposition: str, packet) -> None:
        """A finish row read: a PINNED one names the versions its run is pinned to (packet.pinned_env)."""
        if disposition == "PINNED":
            pins = (packet or {}).get("pinned_env") if isinstance(packet, dict) else None
            self.codes[rs.id].pin_asked = {k: v for k, v in pins.items() if k in VERSION_KEYS} \
                if isinstance(pins, dict) else {}

    def redeployed(self, rs) -> bool:
        """The current worker exited: True when a deployment stopped it, or it pinned the run; the run's next
        worker then starts at once (the next code; the old code, pinned)."""
        code, sb = self.codes[rs.id], self.sandbox
        reason = None
        if rs.waiting == "PINNED" and rs.finished is None and code.pin_asked is not None:
            code.pinned, code.pin_asked, rs.waiting = code.pin_asked, None, None
            reason = "pinned: the run's next worker runs the old command (--worker) with the pinned versions " + \
                ", ".join(f"{k} {v}" for k, v in code.pinned.items())
        elif code.stopping is not None and rs.finished is None and rs.waiting is None:
            how = f"killed (SIGKILL) {GRACE_MS} ms after SIGTERM" if code.killed else "it ended after SIGTERM"
            reason = f"stopped by the deployment ({code.stopping}): {how}"
        code.stopping, code.stop_by, code.killed = None, None, False
        if reason is None:
            return False
        with sb.lock:
            sb.emit(events.Stop, worker=rs.caller.name if rs.caller else None, run=rs.id, reason=reason)
        rs.restart_at = time.monotonic()
        return True

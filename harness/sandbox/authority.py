"""The sandbox's authority port: approvals over HTTP, decided by crashlab.world.approvals (the
simulator's authority port decides by the same functions).

    POST /w/{worker}/authority/request   {"proposal_hash", "action"}  -> {"request_id"}
    GET  /w/{worker}/authority/check?proposal_hash=H&action=A          -> {"live", "approval_id", "expires_at",
                                                                          "revoked", "capability_version", "reason"}

A grant reaches the run's inbox as an ``approval`` event (``expires_at`` in scenario milliseconds, as
``Crashlab-Now``); a scenario's ``approve``, ``revoke`` and ``capability_change`` act here and reach the
inbox as in the simulator. A run whose scenario declares no ``approval`` policy has a standing approval
for its own operation in the sandbox (mode ``none``, written so in the trace's header, where AUTH-01
reads it): a real worker's scenario that says nothing about approvals asks none of its worker. So does
a scenario of the default integration suite (tag ``integration``) not also tagged
``integration-authority``: its other scenarios declare approvals for the simulator only. A
release (any action other than the run's operation) follows ``compensation_authority`` and needs an
approval of its own, as in the simulator.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..vocab import events
from ..world import approvals
from ..world.approvals import Book, Policy
from ..world.ports import PortError

if TYPE_CHECKING:
    from ..vocab.compiled import Rule, Scenario
    from ..vocab.model import PortCall
    from .server import Answer, Caller, Sandbox

PORT = "authority"


#: the default integration suite's tag, and the tag of the scenarios whose approvals it applies
SUITE_TAG, AUTHORITY_TAG = "integration", "integration-authority"


def declared(scenario: "Scenario") -> set[str]:
    """The runs whose approval policy the sandbox applies: declared in the scenario file, outside the
    default integration suite unless the scenario is also tagged for the authority suite."""
    tags = set(scenario.tags)
    if SUITE_TAG in tags and AUTHORITY_TAG not in tags:
        return set()
    raw_runs = (scenario.raw or {}).get("runs") if isinstance(scenario.raw, dict) else None
    return {str(r.get("id")) for r in raw_runs or () if isinstance(r, dict) and "approval" in r}


def policy(scenario: "Scenario", spec: Any) -> Policy:
    """A run's policy in the sandbox: its declared one, else a standing approval for its operation."""
    found = Policy.of(spec)
    if spec.id in declared(scenario):
        return found
    return Policy(mode="none", delay_ms=0, expires_after_ms=found.expires_after_ms, operation=found.operation,
                  compensation_authority=found.compensation_authority)


def header_runs(scenario: "Scenario", runs: list[dict]) -> list[dict]:
    """The header's runs with the approval mode the sandbox applies."""
    return [{**r, "approval": policy(scenario, spec).mode} for r, spec in zip(runs, scenario.runs)]


class Authority:
    """Approvals of one sandbox's runs. Call with the sandbox's lock held."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self.sb = sandbox
        self.books = {spec.id: Book() for spec in sandbox.scenario.runs}
        self.policies = {spec.id: policy(sandbox.scenario, spec) for spec in sandbox.scenario.runs}

    def call(self, caller: "Caller", call: "PortCall", seq: int, fault: "Rule | None") -> "Answer":
        """An authority request that reached the sandbox, answered at once. A fault rule on it answers
        503 before the port (the authority is not one of the services' transports)."""
        from .server import Answer

        if fault is not None:
            return Answer.failed(PortError("unavailable", f"fault {fault.fault} on the authority port"), seq)
        with self.sb.lock:
            try:
                return Answer.ok(self.answer(caller.name, caller.run, call.op, dict(call.args), seq), seq)
            except PortError as exc:
                return Answer.failed(exc, seq)

    def answer(self, worker: str, run: str, op: str, args: dict, seq: int) -> Any:
        """The value of one authority call (raises PortError as the simulator's port does)."""
        book, pol, now = self.books[run], self.policies[run], self.sb.clock.now()
        if op == "check":
            return approvals.check(book, pol, args, now)
        if op != "request":
            raise PortError("bad_request", f"the authority port has no operation {op!r}")
        req, delay = approvals.request(book, pol, args, now)
        self.sb.emit(events.ApprovalRequested, worker=worker, run=run, call=seq, **req)
        if delay is not None:
            self.sb.at(now + delay, lambda: self._grant_locked(run, req), run=run)
        return {"request_id": req["request_id"]}

    def _grant_locked(self, run: str, req: dict) -> None:
        with self.sb.lock:
            if not self.sb.ended:
                self.grant(run, req)

    def grant(self, run: str, req: dict) -> None:
        approval, payload = approvals.grant(self.books[run], self.policies[run], req, self.sb.clock.now())
        self.sb.emit(events.ApprovalGranted, run=run, approval_id=approval.approval_id,
                     proposal_hash=approval.proposal_hash, action=approval.action,
                     expires_at=approval.expires_at, capability_version=approval.capability_version)
        self.sb.deliver(run, "approval", payload, producer="authority")

    def scenario_event(self, etype: str, run: str, data: dict) -> None:
        """A scenario's ``approve``, ``revoke`` or ``capability_change`` for ``run``."""
        book = self.books[run]
        if etype == "approve":
            req = approvals.approve(book, data)
            if req is not None:
                self.grant(run, req)
        elif etype == "revoke":
            approvals.revoke(book)
            self.sb.deliver(run, "revocation", data, producer="authority")
        else:
            version = approvals.change_capability(book)
            self.sb.deliver(run, "capability_change", {"capability_version": version}, producer="authority")

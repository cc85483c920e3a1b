"""The integration card: each invariant pass, fail or not judgeable (and why), and a verdict.

An integration trace is checked by the same checks as any trace (crashlab.checks); the card
only says which of their verdicts an integration run can support. What the sandbox sees (every
service request and answer, every commit) and what the worker's store holds (checkpoints,
ledger, finish) make the effect, classification and disposition rules judgeable. What lives
in the platform ports of the simulator (the lease, the operator, authority, deployments, the
backoff clock) is not visible from outside a real worker: those rules are *not judgeable*, and
their findings are listed but never decide the verdict.

Some rules the card judges on its own evidence: OWN-03 on the order of the worker's store rows,
FENCE-01 on the fence each send carried against the sender's own ledger row, OWN-04 on the finish
row's next_owner (its escalation half is the operator port's). A rule it cannot judge shows the
finding the checks would have charged, never deciding the verdict.

Verdict: fail when a judgeable rule is violated; inconclusive (exit 2) when one of the minimum
set could not be judged (the store was not readable, say), the checks themselves said unknown, or a
premise of the scenario did not happen (a rule that met no request, a failpoint that never fired:
the supervisor's notes; an early-read window that closed before the run's first read:
:func:`early_read_missed`); pass otherwise.

The card is a function of the trace alone (:func:`judged`): ``crashlab integrate`` writes what the
supervisor saw that the events do not show (the store views it could read, the wall-clock cuts,
the missed handovers, its notes; the scenario events a real worker never meets) into the header's
``integration`` field, and every reader of an integration trace (``crashlab check``, ``report``,
crashlab.check_trace) judges it by this card (:func:`as_result`), so a file has one verdict.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .invariants import BY_ID, EXPECTATIONS, INVARIANTS
from .exercised import counts, idle
from ..vocab.results import ScenarioResult, Violation
from ..vocab.timefmt import format_time

MINIMUM = ("EFF-01", "PREP-02", "RETRY-01", "REC-01", "TRUTH-01")
LIMITATION = ("synthetic service on loopback, scaled time: supports 'the worker does not duplicate against a "
              "service with this profile', not 'the production service never duplicates'")

_LEASE = "the worker's lease is its own; the trace holds the supervisor's grant (one live worker per run), not " \
         "the worker's epochs and renewals"
#: invariant -> why an integration run cannot judge it (absent: judgeable).
NOT_JUDGEABLE: dict[str, str] = {
    "OWN-01": _LEASE, "OWN-02": _LEASE, "OWN-03": _LEASE, "LEASE-01": _LEASE,
    "PKT-01": "decision packets go through the simulator's operator port",
    "PKT-02": "decision packets go through the simulator's operator port",
    "RETRY-02": "backoff is judged on clock.sleep records; a real worker's sleeps are not observed",
    "JIT-01": "jitter is judged on random.draw records; a real worker's draws are not observed",
    "MIG-01": "no deployment was carried out: the supervisor redeploys only when given the next code version's "
              "command (crashlab integrate's --worker-next, which defaults to --worker)",
    "PIN-01": "no deployment was carried out: the supervisor redeploys only when given the next code version's "
              "command (crashlab integrate's --worker-next, which defaults to --worker)",
    "EXP-DISPOSITION-AT": "a disposition at a named scenario time depends on wall-clock luck under scaled time",
}
#: judged once a deployment was carried out (the header's ``deployed``: the supervisor ran --worker-next)
DEPLOYMENT_RULES = ("MIG-01", "PIN-01")
#: invariants that need the worker's store views (the minimum set's reason when they are missing).
NEEDS_STORE = {"PREP-01", "PREP-02", "REC-01", "TRUTH-01", "KEY-02", "KNOW-01", "KNOW-02", "EVID-01", "DISP-02",
               "TRUTH-02", "CKPT-01", "TERM-01", "HIST-01", "COMP-01", "EXP-DISPOSITION", "DEAD-01", "DEAD-02",
               "REC-02", "CLS-03", "MSG-01", "EVT-02"}


#: ports whose calls a real worker makes inside itself: evidence of them cannot be observed
UNOBSERVED_PORTS = ("clock.", "random.", "lease.", "operator.", "escalation")


def _unobservable(v) -> bool:
    """An EXP-EVIDENCE finding about evidence only the simulator's platform ports can show."""
    return v.invariant == "EXP-EVIDENCE" and any(f"'{p}" in v.message for p in UNOBSERVED_PORTS)


#: transport refusals a real worker cannot tell from a close after sending (docs/integration.md)
INDISTINCT = ("refused", "timeout_before_send")
_INDISTINCT_WHY = ("over real sockets a refused connection, or one that timed out before sending, cannot be told "
                   "from a close after sending (docs/integration.md, \"HTTP mapping\"), so reading the effect back "
                   "after one is right there")


def _indistinct(v, refusals: dict[int, str]) -> bool:
    """A CLS-03 finding about a refusal only the simulator can call definite: the result it cites
    (its second event, the refusal's answer) carries one of the INDISTINCT codes."""
    return v.invariant == "CLS-03" and len(v.events) > 1 and refusals.get(v.events[1]) in INDISTINCT


def refusal_codes(trace) -> dict[int, str]:
    """Each refused result in a trace: its seq -> its error code."""
    return {e["seq"]: str((e.get("error") or {}).get("code")) for e in trace
            if e.get("kind") == "result" and e.get("ok") is False and isinstance(e.get("error"), dict)}


#: OWN-04 on an integration card: the finish row carries next_owner; the escalation does not reach crashlab
OWN_04_PART = ("judged on the finish row: every finish that leaves something unresolved names an accountable "
               "next_owner (its escalation with a decision packet goes through the simulator's operator port, "
               "which a real worker does not call: not judged)")


def _escalation_only(v) -> bool:
    """An OWN-04 finding about the escalation (no escalation, or its packet's sections), which a real
    worker's trace cannot show; the finish row's missing next_owner is the part the card judges."""
    return v.invariant == "OWN-04" and "names no next_owner" not in v.message


#: the rules the card judges itself, on the worker's store and the sandbox's requests
OWN_JUDGED = frozenset({"OWN-03", "FENCE-01"})
#: FENCE-01 on an integration card: the fence the sandbox received against the worker's own ledger
FENCE_OWN = ("judged on the sandbox's requests and the worker's ledger: every send to a fencing service carries as "
             "its fence the lease epoch of the sender's own SENT_UNKNOWN row for that key (the worker's lease is "
             "its own; its ledger says which epoch it held)")


def unfenced_sends(trace) -> list[str]:
    """Sends to a fencing service (the header's profile) whose ``fence`` is not the lease epoch the sender's
    latest ledger row of the same key names: the epoch the worker itself recorded before it sent."""
    from ..vocab.model import is_dispatch

    head = trace[0] if trace else {}
    services = head.get("services") if isinstance(head.get("services"), dict) else {}
    last: dict = {}
    out = []
    for e in trace:
        if e.get("kind") == "ledger" and isinstance(e.get("epoch"), int):
            last[(e.get("run"), e.get("worker"), e.get("key"))] = (e["epoch"], e["seq"])
        if e.get("lane") != "port" or e.get("kind") != "call" or not is_dispatch(str(e.get("port")), str(e.get("op"))):
            continue
        if not (services.get(e.get("port")) or {}).get("fencing"):
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        held = last.get((e.get("run"), e.get("worker"), args.get("key")))
        if held is None:
            continue           # no ledger row of its own before the send: PREP-02's finding
        fence = args.get("fence")
        if fence != held[0] or isinstance(fence, bool):
            said = "no fence" if fence is None else f"fence {fence!r}"
            out.append(f"{e.get('run')}: {e.get('port')}.{e.get('op')} #{e['seq']} by {e.get('worker')} carries {said} to a fencing "
                       f"service; its own ledger row #{held[1]} for {args.get('key')} names lease epoch {held[0]}")
    return out


#: OWN-03 on an integration card: what the worker's store alone shows of it
STORE_ORDER = ("judged on the worker's store alone: in each of its tables, no row carries a lease epoch lower than "
               "an earlier row's (whether an epoch was the live lease is the worker's own lease, not judgeable)")


def stale_rows(trace) -> list[str]:
    """Rows that landed in a store table (ledger, checkpoints) of a run under a lease epoch lower than
    an earlier row's: the worker's store let a superseded worker write after its successor had. Each
    table's rows reach the trace in the table's own order, so this needs no clock."""
    out, top = [], {}
    for e in trace:
        kind, epoch = e.get("kind"), e.get("epoch")
        if kind not in ("ledger", "checkpoint") or not isinstance(epoch, int) or isinstance(epoch, bool):
            continue
        best = top.get((e.get("run"), kind))
        if best is not None and epoch < best[0]:
            out.append(f"{e.get('run')}: a {kind} row under lease epoch {epoch} (#{e['seq']}) landed after one under "
                       f"epoch {best[0]} (#{best[1]}): the worker's store let a superseded worker write after its "
                       "successor had written (its lease did not fence it)")
        elif best is None or epoch > best[0]:
            top[(e.get("run"), kind)] = (epoch, e["seq"])
    return out


#: the reads that identify an effect (a lookup by key, a search, a registry's version read)
READS = frozenset({"lookup", "search", "get_version", "aggregate"})


def early_read_missed(trace) -> list[str]:
    """The early-read windows a run never met. Where an ambiguous send's effect becomes visible only
    later (it lands late, or the service's reads lag its commits), the scenario tests what the worker
    does with a read made before then. Under scaled real time that window is a few hundred milliseconds:
    a worker on a loaded machine may make its first read after it closed and see the effect, so a
    worker that trusts one early negative read would pass by luck. Each such window whose run's first
    read of the service came after it closed is returned as a reason (the card is then inconclusive)."""
    head = trace[0] if trace else {}
    services = head.get("services") if isinstance(head.get("services"), dict) else {}
    calls, answers, late = {}, {}, set()
    for e in trace:
        if e.get("lane") == "port" and e.get("kind") == "call":
            calls[e.get("seq")] = e
        elif e.get("lane") == "port" and e.get("kind") == "result":
            answers[e.get("call")] = e
        elif e.get("kind") == "late_arrival":
            late.add(e.get("call"))
    origin = head.get("origin_ms") if isinstance(head.get("origin_ms"), int) else 0
    out = []
    for e in trace:
        sent = calls.get(e.get("call"))
        if e.get("kind") != "effect" or sent is None or not isinstance(e.get("t"), int):
            continue
        profile = services.get(sent.get("port")) if isinstance(services.get(sent.get("port")), dict) else {}
        lag = profile.get("lag_ms") if isinstance(profile.get("lag_ms"), int) else 0
        if e.get("call") in late:
            visible, how = e["t"], "the late arrival landed"
        elif profile.get("consistency") == "eventual" and lag > 0:
            visible, how = e["t"] + lag, f"its reads caught up with the commit ({lag} ms of lag)"
        else:
            continue
        first = next((c for s, c in sorted(calls.items()) if s > sent["seq"] and c.get("run") == sent.get("run")
                      and c.get("port") == sent.get("port") and c.get("op") in READS
                      and (answers.get(s) or {}).get("delivered") is not False and s in answers), None)
        if first is None:
            continue           # no read at all: nothing to be early or late (the other rules judge that)
        answered = answers[first["seq"]].get("t")
        if isinstance(answered, int) and answered >= visible:
            out.append(f"{sent.get('run')}: the early-read window of {sent.get('port')}.{sent.get('op')} #{sent['seq']} "
                       f"closed before the run's first read: {how} at {format_time(visible, origin)}, and the first "
                       f"{first.get('port')}.{first.get('op')} (#{first['seq']}) was answered at "
                       f"{format_time(answered, origin)}, so "
                       "what the worker does with an early negative read was not tested (the worker or the machine "
                       "was slower than the window; run again, or with a lower --time-scale)")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    invariant: str
    status: str          # pass | fail | not judgeable | not exercised
    why: str             # for fail: the first finding; for not judgeable and not exercised: the reason
    finding: str | None = None   # not judgeable: the first finding the checks would have charged (None: none)

    def judgeable_text(self) -> str:
        """A not-judgeable line as the card prints it: why, and what the checks would have charged."""
        tail = f"; the checks would have charged: {self.finding}" if self.finding else ""
        return f"{self.why}{tail}"


@dataclass(frozen=True, slots=True)
class RuntimeRun:
    run: str
    unit: str            # the run's workflow / task id in the runtime (CRASHLAB_RUNTIME_ID)
    summary: str         # one line summarizing the runtime's own record of the run
    commits: int         # the sandbox's count of commits for the run (its log, not the runtime's)
    record: str          # where the runtime's record was written
    woken: int = 0       # 0: the run's first unit; N: the unit a worker woken after its Nth wait ran


@dataclass(frozen=True, slots=True)
class RuntimeSection:
    """The durable runtime the worker ran under (--runtime): evidence shown beside the verdict, never
    deciding it."""
    name: str
    title: str
    version: str
    settings: tuple[str, ...]    # the runtime settings that make it a retry owner
    runs: tuple[RuntimeRun, ...]

    def text(self) -> list[str]:
        out = [f"  runtime: {self.title} {self.version}; retry-owner settings: {', '.join(self.settings)}"]
        for r in self.runs:
            if r.woken:
                out.append(f"  runtime record {r.run}, woken unit {r.woken} ({r.unit}): {r.summary}")
                continue
            units = sum(o.run == r.run for o in self.runs)
            over = f" for the run, over its {units} units of work" if units > 1 else ""
            out.append(f"  runtime record {r.run}: {r.summary}; the sandbox counted {r.commits} commit(s){over}")
        return out

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "version": self.version, "settings": list(self.settings),
                "runs": [{"run": r.run, "unit": r.unit, "summary": r.summary, "commits": r.commits,
                          "record": r.record, "woken": r.woken} for r in self.runs]}


@dataclass(frozen=True, slots=True)
class Card:
    scenario: str
    verdict: str         # pass | fail | inconclusive
    lines: tuple[Line, ...]
    reasons: tuple[str, ...]
    runtime: RuntimeSection | None = None
    isolation: str | None = None   # the isolation the worker ran under, as the trace's header records it
    clocks: tuple[str, ...] = ()   # the workers that ran on a skewed wall clock (worker_clocks), and which

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "fail": 1}.get(self.verdict, 2)

    def text(self) -> str:
        """Every rule once: the failures with their first finding, the passes in one list, the rules
        not judgeable grouped by why."""
        out = [f"{self.scenario}: integration verdict {self.verdict.upper()}"]
        for line in self.lines:
            if line.status == "fail":
                out.append(f"  FAIL {line.invariant}: {line.why}")
        passed = [line.invariant for line in self.lines if line.status == "pass"]
        if passed:
            out.append(f"  pass: {', '.join(passed)}")
        idle = [line.invariant for line in self.lines if line.status == "not exercised"]
        if idle:
            out.append(f"  not exercised (nothing in this run to judge them on): {', '.join(idle)}")
        reasons: dict[str, list[str]] = {}
        for line in self.lines:       # grouped by why; a line with a finding stands alone, showing it
            if line.status == "not judgeable":
                reasons.setdefault(line.judgeable_text(), []).append(line.invariant)
        for why, ids in reasons.items():
            out.append(f"  not judgeable: {', '.join(ids)}: {why}")
        out.extend(f"  inconclusive: {r}" for r in self.reasons)
        if self.runtime is not None:
            out.extend(self.runtime.text())
        if self.isolation:
            out.append(f"  isolation: {self.isolation}")
        out.extend(f"  clock: {c}" for c in self.clocks)
        out.append(f"  limitation: {LIMITATION}")
        return "\n".join(out)

    def to_json(self) -> dict:
        out = {"scenario": self.scenario, "verdict": self.verdict, "limitation": LIMITATION,
               "reasons": list(self.reasons),
               "invariants": [{"id": l.invariant, "status": l.status, "why": l.why}
                              | ({"finding": l.finding} if l.status == "not judgeable" else {}) for l in self.lines]}
        if self.runtime is not None:
            out["runtime"] = self.runtime.to_json()
        if self.isolation:
            out["isolation"] = self.isolation
        if self.clocks:
            out["clocks"] = list(self.clocks)
        return out


def card(result: ScenarioResult, *, views: set[str], notes: list[str] = (), cut: list[str] = (),
         timed: list[str] = (), undelivered: list[str] = (), missed: list[str] = (), trace: list[dict] = (),
         unplaced: str | None = None, deployed: list[str] = ()) -> Card:
    """The card of one integration trace's check result; ``views`` are the store views found; ``cut``
    the wall-clock limits that ended a run early (its scenario expectations are then not judgeable:
    what it would have done with more time is wall-clock luck; a violated invariant still fails); ``timed``
    the scenario's inbox events on the clock rather than anchored to a request (their order against the
    worker's requests is wall-clock luck, so the expectations are not judgeable; the invariants are);
    ``undelivered`` the scenario's authority and deployment events, which a real worker never receives
    (its expectations assume them, so they are not judgeable); ``missed`` the takeovers whose replacement
    did not work on the run before the stale worker resumed (the scenario's stale-worker case did not happen: its
    expectations are not judgeable and the verdict is at best inconclusive); ``unplaced`` why none of the
    expectations can be judged (an older trace without the card's inputs); ``trace`` the events judged
    (the codes of the refusals that CLS-03 findings cite, and the store rows OWN-03 is judged on); ``deployed``
    the deployments the supervisor carried out (MIG-01 and PIN-01 are then judged)."""
    store_missing = not {"ledger", "checkpoints", "finish"} <= views
    findings: dict[str, list] = {}
    unobserved = [v for v in result.violations if _unobservable(v)]
    refusals = refusal_codes(trace)
    indistinct = [v for v in result.violations if _indistinct(v, refusals)]
    for v in result.violations:
        if not _unobservable(v) and not _indistinct(v, refusals) and not _escalation_only(v):
            findings.setdefault(v.invariant, []).append(v)
    lines = []
    facts = counts(list(trace)) if trace else None
    found = {v.invariant for v in result.violations}
    for inv in INVARIANTS + EXPECTATIONS:
        nothing = idle(inv.id, facts) if facts is not None and inv.id not in found else None
        if nothing is not None:
            lines.append(Line(invariant=inv.id, status="not exercised", why=nothing))
            continue
        if inv.id == "OWN-03" and trace and not store_missing:
            stale = stale_rows(trace)
            lines.append(Line(invariant=inv.id, status="fail", why=stale[0]) if stale
                         else Line(invariant=inv.id, status="pass", why=STORE_ORDER))
            continue
        if inv.id == "FENCE-01" and trace and not store_missing:
            unfenced = unfenced_sends(trace)
            lines.append(Line(invariant=inv.id, status="fail", why=unfenced[0]) if unfenced
                         else Line(invariant=inv.id, status="pass", why=FENCE_OWN))
            continue
        why = NOT_JUDGEABLE.get(inv.id) if not (deployed and inv.id in DEPLOYMENT_RULES) else None
        if why is None and unplaced and inv.id.startswith("EXP-"):
            why = unplaced
        if why is None and missed and inv.id.startswith("EXP-"):
            why = f"no handover: {missed[0]}"
        if why is None and cut and inv.id.startswith("EXP-"):
            why = f"the run was cut by the wall-clock limit ({cut[0]})"
        if why is None and undelivered and inv.id.startswith("EXP-"):
            why = f"the scenario's {undelivered[0]} is not delivered to a real worker (deployments live in the " \
                  "simulator's platform), and its expectations assume it"
        if why is None and timed and inv.id.startswith("EXP-"):
            why = f"the scenario's {timed[0]} is on the clock, not anchored to a request: under real time its " \
                  "order against the worker's requests is luck"
        if why is None and store_missing and inv.id in NEEDS_STORE:
            why = "the worker's store views were not readable (" + ", ".join(
                sorted({"ledger", "checkpoints", "finish"} - views)) + ": missing, or unreadable as the reasons say)"
        charged = next((v.message for v in result.violations if v.invariant == inv.id), None)
        if why is not None:
            lines.append(Line(invariant=inv.id, status="not judgeable", why=why, finding=charged))
        elif inv.id == "EXP-EVIDENCE" and unobserved and inv.id not in findings:
            lines.append(Line(invariant=inv.id, status="not judgeable", finding=charged,
                              why=f"the scenario requires evidence a real worker produces inside itself "
                                  f"({unobserved[0].message})"))
        elif inv.id == "CLS-03" and indistinct and inv.id not in findings:
            lines.append(Line(invariant=inv.id, status="not judgeable", why=_INDISTINCT_WHY, finding=charged))
        elif inv.id in findings:
            lines.append(Line(invariant=inv.id, status="fail", why=findings[inv.id][0].message))
        elif inv.id == "OWN-04":
            lines.append(Line(invariant=inv.id, status="pass", why=OWN_04_PART))
        else:
            lines.append(Line(invariant=inv.id, status="pass", why=BY_ID[inv.id].statement))
    reasons = [f"{line.invariant} is in the minimum set and was not judgeable: {line.why}"
               for line in lines if line.invariant in MINIMUM and line.status == "not judgeable"]
    if result.verdict == "unknown":
        reasons.extend(result.notes or ("the checks could not judge every run",))
    reasons.extend(notes)
    reasons.extend(early_read_missed(list(trace)))
    reasons.extend(cut)
    reasons.extend(missed)
    failed = any(line.status == "fail" for line in lines)
    verdict = "fail" if failed else ("inconclusive" if reasons else "pass")
    return Card(scenario=result.id, verdict=verdict, lines=tuple(lines), reasons=tuple(reasons))


# --------------------------------------------------------------------------- the card of a trace
#: The header field ``crashlab integrate`` writes: the card's inputs the events do not show.
FIELD = "integration"
#: Its lists (each a list of strings), as :func:`card` takes them ("views": the store views read).
INPUTS = ("views", "notes", "cut", "timed", "undelivered", "missed", "deployed")
STORE_VIEWS = ("checkpoints", "finish", "ledger")
LEGACY = ("the trace was written before crashlab recorded the integration card's inputs in its header (the store "
          "views read, wall-clock cuts, missed handovers): run crashlab integrate again for a card")


def inputs(header: dict) -> dict[str, list[str]] | None:
    """The card's inputs from an integration trace's header, or None when it has none (an older trace);
    a field that is not a list of strings is a one-line usage error naming it."""
    given = header.get(FIELD)
    if given is None:
        return None
    from ..vocab.errors import UsageError

    if not isinstance(given, dict):
        raise UsageError(f"the trace header's {FIELD} field is not an object", hint="check a trace exactly as "
                         "crashlab integrate wrote it")
    if not any(name in given for name in INPUTS):   # only the run's options: written before the card's inputs were
        return None
    out = {}
    for name in INPUTS:
        value = given.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"the trace header's {FIELD}.{name} is not a list of strings",
                             hint="check a trace exactly as crashlab integrate wrote it")
        out[name] = value
    return out


def judged(events: list[dict], raw: ScenarioResult | None = None) -> Card:
    """The integration card of a trace (header first): a function of the trace alone. ``raw`` is the
    checks' own result for it (crashlab.checks.verdict.check_raw), computed when not given."""
    held = _JUDGED.get(id(events))
    if held is not None and held[0] is events:     # a report asks again for the same trace's coverage
        return held[1]
    if raw is None:
        from .verdict import check_raw

        raw = check_raw(events)
    given = inputs(events[0])
    if given is None:        # an older integration trace: its expectations cannot be placed, nor a pass claimed
        out = card(raw, views=set(STORE_VIEWS), notes=[LEGACY], unplaced=LEGACY, trace=events)
    else:
        out = card(raw, views=set(given["views"]), notes=given["notes"], cut=given["cut"], timed=given["timed"],
                   undelivered=given["undelivered"], missed=given["missed"], trace=events,
                   deployed=given["deployed"])
    recorded = (events[0].get(FIELD) or {}).get("isolation") if isinstance(events[0].get(FIELD), dict) else None
    if isinstance(recorded, dict) and isinstance(recorded.get("mode"), str):
        out = replace(out, isolation=f"{recorded['mode']} ({recorded.get('detail', '')})")
    skewed = (events[0].get(FIELD) or {}).get("clocks") if isinstance(events[0].get(FIELD), dict) else None
    if skewed is not None:
        if not isinstance(skewed, list) or not all(isinstance(c, str) for c in skewed):
            from ..vocab.errors import UsageError

            raise UsageError(f"the trace header's {FIELD}.clocks is not a list of strings",
                             hint="check a trace exactly as crashlab integrate wrote it")
        out = replace(out, clocks=tuple(skewed))
    if len(_JUDGED) >= 64:
        _JUDGED.pop(next(iter(_JUDGED)))
    _JUDGED[id(events)] = (events, out)
    return out


#: The last cards judged, by the identity of their event list (which it holds, so the id stays its own).
_JUDGED: dict[int, tuple[list, Card]] = {}


def as_result(raw: ScenarioResult, judged_card: Card) -> ScenarioResult:
    """The checks' result of an integration trace, told as its card tells it: the card's verdict
    (inconclusive is unknown), the card's failures as the violations, each finding of a rule the
    card could not judge as a note (never a failure), the card's reasons as notes."""
    status = {line.invariant: line for line in judged_card.lines}
    failing = {i for i, line in status.items() if line.status == "fail"}
    # a rule the card judges on its own (OWN-03, FENCE-01) is told by the card's finding, not the checks'
    violations = [v for v in raw.violations if v.invariant in failing and v.invariant not in OWN_JUDGED]
    notes = []
    for v in raw.violations:
        line = status.get(v.invariant)
        if v.invariant not in failing and line is not None:
            notes.append(f"{v.invariant} {line.status} on an integration run ({line.why}); the checks' finding, "
                         f"which does not decide it: {v.message}")
    from .rubric import POINT_OF

    for inv_id in sorted(failing - {v.invariant for v in violations}):    # a failure only the card finds (OWN-03)
        why = status[inv_id].why
        point = POINT_OF.get(inv_id)
        violations.append(Violation(invariant=inv_id, message=why, run=why.split(":", 1)[0] or None,
                                    events=tuple(sorted({int(n) for n in re.findall(r"#(\d+)", why)})),
                                    category=point.category if point else BY_ID[inv_id].category,
                                    point=point.id if point else None))
    notes.extend(judged_card.reasons)
    notes.extend(n for n in raw.notes if n not in notes)
    verdict = {"pass": "pass", "fail": "fail"}.get(judged_card.verdict, "unknown")
    return replace(raw, verdict=verdict, violations=tuple(violations), notes=tuple(notes))


# ----------------------------------------------------------------- which traces are integration runs'
#: The adapter name an integration trace's header carries: this, then the worker command.
PREFIX = "integrate:"

def is_integration(header: dict) -> bool:
    """Whether a trace's header is an integration run's (its verdict is its integration card's)."""
    return isinstance(header, dict) and str(header.get("adapter") or "").startswith(PREFIX)

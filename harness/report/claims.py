"""Typed facts with their trace event numbers: what the report's generated sentences say.

Every sentence crashlab writes about a run (the operator and service-owner messages, the
decision packet's summary, the resolved/unresolved line of a page) is rendered from
:class:`Fact` values built here from the trace, and each fact carries the event numbers
(``seq``) that support it, so a reader - or a test - can check a sentence against the very
events it cites. A fact states typed values (keys, codes, counts, scenario-clock times in
ms), never prose; the words are the renderers' (comms.py, packet.py, html.py).

Kinds (:data:`KINDS`), with the events their ``seqs`` cite:

* ``ledger``: the ledger's last entry of one ``key`` (``code`` its knowledge, ``role``
  effect | compensation, ``op`` its operation, ``ref`` its remote reference); seqs: that append.
* ``reads``: consecutive answers (in the order the reads were sent) of one read ``port.op``
  of one ``key`` (None: a read by other fields) with one answer ``code``; ``count`` answers, the ``first`` and ``last`` at
  their results' times; seqs: the result events.
* ``requests``: consecutive calls of one ``port.op`` (effect sends and reads, in the order
  they were sent) with one outcome ``code`` (``no_answer``: the trace holds none) and, for
  an error, whether it was definite (``flag``; None: no error);
  ``count``, ``first``/``last`` at the calls' times; seqs: the call events.
* ``cancellation``: the first cancellation of the run (``first``: its time); seqs: that event.
* ``deadline``: the intake's business deadline (``at``; None: the intake names none);
  seqs: the intake's delivery.
* ``disposition``: the run's accepted finish (``code``); seqs: that finish.
* ``owner``: the next owner the run named (``name``): its accepted finish's, else (a run not
  over) its packet's or its last finish's; seqs: the finish or escalation naming it.
* ``action``: a packet's recommended action (``code``; ``port``/``op`` the read it names,
  ``key`` the key it names, ``name`` the packet's own words: its proposal and what it
  requires); seqs: the escalation.
* ``authority``: whether a packet says the authority is live (``flag``); seqs: the escalation.
* ``packet_deadline``: the deadline a packet's budget gives (``at``; None: none); seqs: the escalation.
* ``remote``: what the service really holds of one record the run committed (crashlab's
  ground truth, never known to the run): ``ref``, ``key`` (the key it was committed under),
  ``code`` held | released, ``first`` the commit's time, ``last`` the release's (None: held),
  ``name`` who released it (this run | another actor); seqs: the commit, then the release.
* ``resolution``: whether the run is resolved (``flag``): a resolved disposition and no
  ledger entry left unresolved (``keys``: those that are); seqs: the last append of every
  key of the run and the accepted finish, in seq order (none at all: a run with neither
  ledger entry nor finish is unresolved on the evidence of their absence).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..vocab.model import DISPOSITION_EFFECT_CLAIM, EFFECT_OPS, RunState

#: Every kind of fact, and what its seqs cite.
KINDS = {"ledger": "the key's last ledger append", "reads": "the read results",
         "requests": "the service calls", "cancellation": "the cancellation",
         "deadline": "the intake's delivery", "disposition": "the accepted finish",
         "owner": "the finish or escalation that names the owner", "action": "the escalation",
         "authority": "the escalation", "resolution": "the key's last appends and the finish",
         "remote": "the commit and, if any, its release", "packet_deadline": "the escalation"}
#: Ledger knowledge that leaves an effect unresolved (an operator still has something to decide).
UNRESOLVED_KNOWLEDGE = frozenset({"SENT_UNKNOWN", "COMPENSATION_PROPOSED"})
#: Dispositions that make a claim about the effect (the run is over).
TERMINAL = frozenset(s.value for s in DISPOSITION_EFFECT_CLAIM)
#: Dispositions that close a run with nothing left to decide (success, or certainly no effect).
RESOLVED_DISPOSITIONS = frozenset(s.value for s, claim in DISPOSITION_EFFECT_CLAIM.items()
                                  if s is RunState.SUCCEEDED or claim == "absent")


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """One typed statement about one run, with the trace events that support it."""

    kind: str
    run: str
    seqs: tuple[int, ...]
    key: str | None = None
    port: str | None = None
    op: str | None = None
    code: str | None = None
    role: str | None = None
    ref: str | None = None
    name: str | None = None
    count: int | None = None
    first: int | None = None
    last: int | None = None
    at: int | None = None
    flag: bool | None = None
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fact kind {self.kind!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    """The facts of one run, as the renderers read them."""

    run: str
    ledger: tuple[Fact, ...]
    reads: tuple[Fact, ...]
    requests: tuple[Fact, ...]
    cancellation: Fact | None
    deadline: Fact | None
    disposition: Fact | None
    owner: Fact | None
    action: Fact | None
    authority: Fact | None
    resolution: Fact
    packet_deadline: Fact | None = None
    remote: tuple[Fact, ...] = ()

    def all(self) -> tuple[Fact, ...]:
        single = (self.cancellation, self.deadline, self.disposition, self.owner, self.action, self.authority,
                  self.resolution, self.packet_deadline)
        return (*self.ledger, *self.reads, *self.requests, *(f for f in single if f is not None), *self.remote)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def answer_code(result: dict) -> str:
    """What a service answered, as one code: an error's code; a read's record status (else
    found) | in_flight | not_found (a search: found | not_found by its records); otherwise the
    answer's status, or ok."""
    if not result.get("ok"):
        err = result.get("error") if isinstance(result.get("error"), dict) else {}
        return str(err.get("code") or "error")
    value = result.get("value") if isinstance(result.get("value"), dict) else {}
    if "found" in value:
        record = value.get("record") if isinstance(value.get("record"), dict) else {}
        if value.get("found"):
            return str(record["status"]) if isinstance(record.get("status"), str) else "found"
        return "in_flight" if value.get("in_flight") else "not_found"
    if "records" in value:
        return "found" if value.get("records") else "not_found"
    return str(value.get("status") or "ok")


def _runs(items: Iterable[tuple[tuple, int, int]], kind: str, run: str) -> list[Fact]:
    """Consecutive items with the same signature ``(port, op, key, code, flag)`` as one fact each."""
    out: list[Fact] = []
    group: list[tuple[tuple, int, int]] = []

    def flush():
        if group:
            port, op, key, code, flag = group[0][0]
            out.append(Fact(kind=kind, run=run, seqs=tuple(s for _, s, _ in group), port=port, op=op, key=key,
                            code=code, flag=flag, count=len(group), first=group[0][2], last=group[-1][2]))
            group.clear()

    for item in items:
        if group and group[0][0] != item[0]:
            flush()
        group.append(item)
    flush()
    return out


def run_facts(events: list[dict], run: str, escalation: dict | None = None) -> RunFacts:
    """The facts of ``run`` read from its trace; ``escalation`` (the packet's escalation
    event, or None) adds the recommended action, the authority and, when the run named none
    in an accepted finish, the owner."""
    head = events[0] if events else {}
    services = set((head.get("services") or {}).keys())
    last_append: dict[str, dict] = {}
    calls: dict[int, dict] = {}
    results: dict[int, dict] = {}
    reads, requests = [], []
    cancel = intake = finish = None
    commits: dict[str, dict] = {}
    releases: dict[str, dict] = {}
    for ev in events:
        if ev.get("lane") == "remote" and ev.get("kind") == "released":
            releases.setdefault(str(ev.get("ref")), ev)
        if ev.get("run") != run:
            continue
        lane, kind = ev.get("lane"), ev.get("kind")
        if lane == "remote" and kind == "effect" and ev.get("cause") != "other_actor":
            commits.setdefault(str(ev.get("ref")), ev)
        if lane == "knowledge" and kind == "ledger":
            last_append[str(ev.get("key"))] = ev
        elif lane == "world" and kind == "cancel" and cancel is None:
            cancel = ev
        elif lane == "world" and kind == "deliver" and intake is None \
                and isinstance(ev.get("event"), dict) and ev["event"].get("type") == "intake":
            intake = ev
        elif lane == "run" and kind == "finish" and ev.get("accepted"):
            finish = ev
        elif lane == "port" and kind == "call" and ev.get("port") in services and ev.get("op") != "describe":
            calls[ev["seq"]] = ev
        elif lane == "port" and kind == "result" and ev.get("call") in calls:
            results[ev["call"]] = ev
    for seq in sorted(calls):                      # causal order: by send, not by answer
        call, result = calls[seq], results.get(seq)
        args = call.get("args") if isinstance(call.get("args"), dict) else {}
        code = answer_code(result) if result is not None else "no_answer"
        err = result.get("error") if result is not None and isinstance(result.get("error"), dict) else None
        definite = None if err is None else bool(err.get("definite"))
        requests.append(((call["port"], call["op"], None, code, definite), seq, int(call.get("t") or 0)))
        if result is not None and call["op"] not in EFFECT_OPS.get(call["port"], ()):
            reads.append(((call["port"], call["op"], _str(args.get("key")), code, None), result["seq"],
                          int(result.get("t") or 0)))
    ledger = []
    for key, ev in last_append.items():
        entry = ev.get("entry") if isinstance(ev.get("entry"), dict) else {}
        ledger.append(Fact(kind="ledger", run=run, seqs=(ev["seq"],), key=key, code=_str(ev.get("knowledge")),
                           role="compensation" if entry.get("kind") == "compensation" else "effect",
                           op=_str(entry.get("operation")), ref=_str(entry.get("remote_ref"))))
    ledger.sort(key=lambda f: f.seqs[0])
    deadline = None
    if intake is not None:
        payload = intake["event"].get("payload") if isinstance(intake["event"].get("payload"), dict) else {}
        at = payload.get("deadline")
        deadline = Fact(kind="deadline", run=run, seqs=(intake["seq"],),
                        at=at if isinstance(at, int) and not isinstance(at, bool) else None)
    disposition = None if finish is None else Fact(kind="disposition", run=run, seqs=(finish["seq"],),
                                                     code=_str(finish.get("disposition")))
    owner = None
    terminal = finish is not None and finish.get("disposition") in TERMINAL
    if finish is not None and finish.get("next_owner"):
        owner = Fact(kind="owner", run=run, seqs=(finish["seq"],), name=str(finish["next_owner"]))
    elif not terminal and escalation is not None and isinstance(escalation.get("packet"), dict) \
            and escalation["packet"].get("next_owner"):
        owner = Fact(kind="owner", run=run, seqs=(escalation["seq"],), name=str(escalation["packet"]["next_owner"]))
    elif not terminal:
        named = next((ev for ev in reversed(events) if ev.get("run") == run and ev.get("kind") == "finish"
                      and ev.get("next_owner")), None)
        if named is not None:
            owner = Fact(kind="owner", run=run, seqs=(named["seq"],), name=str(named["next_owner"]))
    action = authority = packet_deadline = None
    packet = escalation.get("packet") if escalation is not None else None
    if isinstance(packet, dict):
        rec = packet.get("recommended")
        if isinstance(rec, dict) and isinstance(rec.get("action"), str):
            port = op = None
            query = rec.get("query")
            if isinstance(query, str) and "." in query:
                port, _, op = query.partition(".")
                op = op.split("(", 1)[0]
            said = "; ".join(str(rec[k]) for k in ("proposal", "requires") if isinstance(rec.get(k), str))
            action = Fact(kind="action", run=run, seqs=(escalation["seq"],), code=rec["action"], port=port, op=op,
                          key=_str(rec.get("semantic_key")), name=said or None)
        budget = packet.get("budget")
        if isinstance(budget, dict) and "deadline" in budget:
            at = budget["deadline"]
            packet_deadline = Fact(kind="packet_deadline", run=run, seqs=(escalation["seq"],),
                                   at=at if isinstance(at, int) and not isinstance(at, bool) else None)
        auth = packet.get("authority")
        if isinstance(auth, dict) and isinstance(auth.get("live"), bool):
            authority = Fact(kind="authority", run=run, seqs=(escalation["seq"],), flag=auth["live"])
    open_keys = tuple(f.key for f in ledger if f.code in UNRESOLVED_KNOWLEDGE and f.key is not None)
    done = disposition is not None and disposition.code in RESOLVED_DISPOSITIONS
    resolution = Fact(kind="resolution", run=run, flag=done and not open_keys, keys=open_keys,
                      code=disposition.code if disposition else None,
                      seqs=tuple(sorted((*(f.seqs[0] for f in ledger), *((finish["seq"],) if finish else ())))))
    remote = []
    for ref, ev in commits.items():
        gone = releases.get(ref)
        remote.append(Fact(kind="remote", run=run, ref=ref, key=_str(ev.get("key")),
                           code="released" if gone else "held", first=int(ev.get("t") or 0),
                           last=int(gone.get("t") or 0) if gone else None,
                           name=None if gone is None else "another actor" if gone.get("cause") == "other_actor"
                           else "this run", seqs=(ev["seq"], *((gone["seq"],) if gone else ()))))
    return RunFacts(run=run, ledger=tuple(ledger), remote=tuple(remote), reads=tuple(_runs(reads, "reads", run)),
                    requests=tuple(_runs(requests, "requests", run)),
                    cancellation=None if cancel is None else Fact(kind="cancellation", run=run, seqs=(cancel["seq"],),
                                                                  first=int(cancel.get("t") or 0)),
                    deadline=deadline, packet_deadline=packet_deadline, disposition=disposition, owner=owner, action=action, authority=authority,
                    resolution=resolution)


def cite(*facts: Fact | None) -> str:
    """The event numbers of ``facts`` as a reader finds them on the page: ``#12, #40``."""
    seqs = sorted({s for f in facts if f is not None for s in f.seqs})
    if len(seqs) > 4:
        return f"#{seqs[0]}–#{seqs[-1]}, {len(seqs)} events"
    return ", ".join(f"#{s}" for s in seqs)

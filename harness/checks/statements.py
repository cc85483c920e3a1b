"""What a decision packet and a message may say, judged by what can be checked mechanically.

AR-08 "Operate the recovery system": "Do not expose secrets, raw private context, or
speculative model narratives. Evidence references and typed parameters are usually
sufficient." A packet (``operator.escalate``, ``run.finish(packet=...)``) and a message (the
finish reason an operator or user reads, a notification sent to the user) are held to:

* **no raw inbox payload**: no inbox event or payload copied whole, and no free text an
  inbox event carried (a user's or approver's own words): name the event by its id instead;
* **no speculation**: no hedged narrative ("probably", "likely", "it seems", ...);
* **no claim the ledger does not support**: a text that says the run's effect happened
  ("confirmed", "reserved", "went through", "created", "on hold for", ...) needs the run's effect CONFIRMED (or
  compensated since) in the ledger as it stood; one that says a message was delivered needs
  that notification CONFIRMED. A clause that negates or hedges the word ("not confirmed",
  "whether it was reserved is unknown") claims nothing;
* **a legal action** (packets), judged by the control each action is (controls.py): the
  recommendation is one of the chapter's allowlisted controls, by a common name or declared with
  ``control``; no action, recommended or offered, is a refused control (a generic state edit, a
  new key); and each control's precondition holds in the ledger, so RETRY (redispatch) is never
  legal while an effect is unresolved: "The next step is reconciliation, not repetition."

Typed parameters (an effect's ``intent``) are the request itself, not a statement about it,
and are not read as text.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from .common import UNRESOLVED, Finding, Invariant, finish_call, inv
from .controls import BY_ID, resolve, unmet
from .index import RunIndex, TraceIndex
from .knowledge import knew
from .ownership import reads_of
from .values import obj

#: Hedged guesses. Stating uncertainty is honest ("the request may have left", "unknown"); guessing
#: the answer is not ("it probably went through").
_SPECULATION = re.compile(r"\b(probably|likely|maybe|perhaps|presumably|apparently|hopefully|"
                          r"i think|i believe|i guess|we think|we believe|should have|must have|"
                          r"it seems|seems to|looks like)\b", re.I)
#: Words that say the effect exists. A hold "created", "placed" or "secured", a slot "on hold for" or
#: "held for" someone is a reservation said in other words; "on hold" alone (a paused run) is not.
_EXISTS = re.compile(r"\b(confirmed|succeeded|successful|successfully|went through|completed|reserved|booked|"
                     r"published|is in place|created|placed|secured|on hold for|held for)\b", re.I)
_DELIVERED = re.compile(r"\b(delivered|was sent|has been sent|received)\b", re.I)
_HEDGE = re.compile(r"\b(not|no|never|whether|unknown|unresolved|uncertain|unclear|cannot|can't|pending|if|"
                    r"until|ambiguous|unless)\b", re.I)
_CLAUSE = re.compile(r"[;:,.()\[\]]")
_PRESENT = frozenset({"CONFIRMED", "COMPENSATION_PROPOSED", "COMPENSATED"})
#: Subtrees of a packet that hold typed parameters, not statements.
_TYPED = frozenset({"intent"})
#: Inbox free text shorter than this is a token (an id, a code), not private context.
_MIN_TEXT = 12


def _texts(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, text) of every free-text string in a JSON value (strings with a space)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in _TYPED:
                yield from _texts(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _texts(v, f"{path}[{i}]")
    elif isinstance(value, str) and " " in value.strip():
        yield path, value


def _objects(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _objects(v)
    elif isinstance(value, list):
        for v in value:
            yield from _objects(v)


def _claims(text: str, pattern: re.Pattern) -> str | None:
    """The word of ``pattern`` that ``text`` asserts outright (in a clause that neither
    negates nor hedges it), or None."""
    for clause in _CLAUSE.split(text):
        found = pattern.search(clause)
        if found and not _HEDGE.search(clause) and not _SPECULATION.search(clause):
            return found.group(0)
    return None


def _quote(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[:limit - 1] + "\u2026"
    return f"\u201c{text}\u201d"


def _held(run: RunIndex, worker: str, at: int) -> dict:
    then = knew(run, worker, at)
    return {k: then.ledger(k) for k in run.ledger_keys_before(at)}


def _notification_keys(run: RunIndex, at: int) -> list:
    return [k for k in run.ledger_keys_before(at)
            if obj(run.ledger_by_key[k][0].get("entry")).get("service") == "notification"]


def unsupported(run: RunIndex, text: str, held: dict, at: int, about: Any = None) -> str | None:
    """What ``text`` claims that the ledger ``held`` does not support (\u201cconfirmed\u201d while
    the ledger holds k SENT_UNKNOWN), or None. ``about`` is the key a user message names (its
    ``about``), else the run's own effect is meant."""
    word = _claims(text, _EXISTS)
    if word is not None and run.service != "notification":
        keys = [about] if about in held else [k for k in run.primary_keys(at) if k in held]
        if not any(held.get(k) in _PRESENT for k in keys):
            state = ", ".join(f"{k} {held.get(k)}" for k in keys) or "no effect prepared"
            return f"\u201c{word}\u201d while the ledger holds {state}"
    word = _claims(text, _DELIVERED)
    if word is not None:
        keys = _notification_keys(run, at) if run.service != "notification" else run.primary_keys(at)
        if keys and not any(held.get(k) == "CONFIRMED" for k in keys):
            state = ", ".join(f"{k} {held.get(k)}" for k in keys)
            return f"\u201c{word}\u201d while the ledger holds {state}"
    return None


def _raw_inbox(run: RunIndex, value: Any, before: int) -> list[str]:
    """What of the run's inbox (delivered before ``before``) ``value`` carries raw."""
    found: list[str] = []
    events = [ev for ev in run.inbox if ev["seq"] < before]
    if not events:
        return found
    for node in _objects(value):
        if not isinstance(node, dict) or not node:
            continue
        for ev in events:
            event = obj(ev.get("event"))
            what = "inbox event" if node == event else \
                "the payload of inbox event" if event.get("payload") and node == event.get("payload") else None
            if what is not None:
                found.append(f"copies {what} {event.get('event_id')} (#{ev['seq']}) whole: name the event by "
                             "its event id instead")
                break
    texts = [t for _, t in _texts(value)]
    for ev in events:
        event = obj(ev.get("event"))
        for _, raw in _texts(event.get("payload")):
            if len(raw.strip()) >= _MIN_TEXT and any(raw.strip() in t for t in texts):
                found.append(f"quotes the raw text of inbox event {event.get('event_id')} (#{ev['seq']}), "
                             f"{_quote(raw)}: name the event by its id instead")
                break
    return list(dict.fromkeys(found))


def action_problems(ix: TraceIndex, run: RunIndex, packet: dict, held: dict) -> list[str]:
    """What is illegal about the actions a packet recommends and offers, judged by the control each
    is (controls.py) against the ledger ``held``: the recommendation must be an allowlisted control
    (by a common name, or declared), no action may be a refused control (edit state, a new key), and
    each control PKT-02 judges needs its precondition met. An alternative of a name no control
    knows, and declaring none, is not judged."""
    alternatives = packet.get("alternatives")
    items = [("recommends", packet.get("recommended"))] + \
        [("offers", a) for a in (alternatives if isinstance(alternatives, list) else ())]
    problems: list[str] = []
    for verb, item in items:
        found = resolve(item)
        if found is None:
            continue
        if found.problem is not None:
            if verb == "recommends" or found.declared:
                problems.append(f"{verb} {found.action}, {found.problem}")
            continue
        if not found.controls:
            continue
        controls = [BY_ID[c] for c in found.controls]
        if all(c.refused for c in controls):
            c = controls[0]
            problems.append(f"{verb} {found.action} ({c.does}), which no packet may offer: {c.refusal}")
            continue
        if any(c.judged_by != "PKT-02" for c in controls):
            continue
        missing = [unmet(c, held) for c in controls]
        if not all(missing):
            continue
        if controls[0].id == "redispatch":
            problems.append(_blind_repeat(ix, run, found.action, held))
        else:
            problems.append(f"{verb} {found.action} ({controls[0].does}) while {missing[0].unmet}: it needs "
                            f"{missing[0].words}")
    return problems


def _blind_repeat(ix: TraceIndex, run: RunIndex, action: str, held: dict) -> str:
    k = next(k for k, v in held.items() if v in UNRESOLVED)
    service = obj(run.ledger_by_key[k][0].get("entry")).get("service") or run.service
    reads = "which offers an identifying read" if reads_of(ix, service) else "which offers no identifying read"
    return (f"offers {action} while {k} is {held[k]} on {service}, {reads}: an unresolved effect is reconciled "
            "or stopped, never repeated")


def packet_statements(ix: TraceIndex, run: RunIndex, packet: Any, worker: str, before: int) -> list[str]:
    """What a packet escalated by ``worker`` just before seq ``before`` says that it may not."""
    if not isinstance(packet, dict):
        return []
    problems = _raw_inbox(run, packet, before)
    held = _held(run, worker, before)
    for path, text in _texts(packet):
        spec = _SPECULATION.search(text)
        if spec:
            problems.append(f"speculates in {path} ({_quote(text)}: \u201c{spec.group(0)}\u201d): state what "
                            "the evidence shows, or that it is unknown")
            continue
        why = unsupported(run, text, held, before)
        if why:
            problems.append(f"says in {path} ({_quote(text)}) {why}")
    problems += action_problems(ix, run, packet, held)
    return list(dict.fromkeys(problems))


def _pkt_02(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for esc in run.escalations:
            before = esc["call"] if isinstance(esc.get("call"), int) else esc["seq"]
            for problem in packet_statements(ix, run, esc.get("packet"), esc["worker"], before):
                yield run.id, f"the decision packet at #{esc['seq']} {problem}", (esc["seq"],), False
        for f in run.finishes:
            if f.get("accepted") and isinstance(f.get("packet"), dict):
                for problem in packet_statements(ix, run, f["packet"], f["worker"], finish_call(f)):
                    yield run.id, f"the packet of finish {f['disposition']} at #{f['seq']} {problem}", \
                        (f["seq"],), False


def _msg_01(ix: TraceIndex) -> Iterator[Finding]:
    for run in ix.runs.values():
        for f in run.finishes:
            reason = f.get("reason")
            if not f.get("accepted") or not isinstance(reason, str) or not reason.strip():
                continue
            at = finish_call(f)
            problems = _raw_inbox(run, reason, at)
            spec = _SPECULATION.search(reason)
            if spec:
                problems.append(f"speculates (\u201c{spec.group(0)}\u201d)")
            why = unsupported(run, reason, _held(run, f["worker"], at), at)
            if why:
                problems.append(f"says {why}")
            for problem in problems:
                yield run.id, f"the reason of finish {f['disposition']} at #{f['seq']} ({_quote(reason)}) " \
                              f"{problem}", (f["seq"],), False
        for d in run.dispatches:
            if d.service != "notification" or d.role == "primary":
                continue
            intent = d.intent or {}
            text = " ".join(str(v).replace("-", " ").replace("_", " ") for k, v in sorted(intent.items())
                            if isinstance(v, str) and k in ("message", "template", "subject", "body", "text"))
            if not text:
                continue
            why = unsupported(run, text, _held(run, d.worker, d.seq), d.seq, about=intent.get("about"))
            if why:
                yield run.id, f"the message {d.service}.{d.op} #{d.seq} tells the user {_quote(text)}: it says {why}", \
                    (d.seq,), False


#: The ownership invariants on what packets and messages say (rubric point O4).
INVARIANTS: tuple[Invariant, ...] = (
    inv("PKT-02", "A decision packet carries typed fields and evidence references, and only legal actions.",
        "ownership", False, None, _pkt_02,
        "Every operator.escalate packet (and a finish's packet) copies no inbox event or payload whole and "
        "quotes no free text an inbox event carried (12 characters or more); no free-text field speculates "
        "(probably, likely, maybe, it seems, ...); no free-text field says the run's effect happened "
        "(confirmed, reserved, created, on hold for, went through, ...) unless the ledger held it CONFIRMED "
        "(or compensated since) "
        "when the packet was sent, nor that a message was delivered unless its notification was CONFIRMED "
        "(a clause that negates or hedges the word claims nothing; an effect's intent is typed parameters, "
        "not text); recommended.action is an allowlisted control (docs/adapters.md, \u201cThe operator's "
        "controls\u201d), by a common name or declared with recommended.control; no action, recommended or "
        "offered as an alternative, is a generic state edit or a new key; and each action's control needs "
        "its precondition in the ledger the worker knew: marking an external reference needs an effect that "
        "was sent (any knowledge but PROPOSED), and RETRY (redispatch) is illegal while any ledger key is unresolved (the preconditions of "
        "a reconciliation read and a corrective proposal are PKT-01's). An alternative whose name no "
        "control knows, declaring none, is not judged.",
        "the escalation (or the finish carrying the packet)"),
    inv("MSG-01", "A message to the user or operator claims only what the ledger supports.", "ownership", False,
        None, _msg_01,
        "An accepted finish's reason, and every notification sent to the user other than the run's own "
        "operation (its message, template, subject or body), is held to the packet's text rules: no raw "
        "inbox text, no speculation, and no claim that the run's effect happened (the key the message is "
        "about, else the run's own effect) or that a message was delivered unless the ledger held it "
        "CONFIRMED when the message was sent.",
        "the finish or the notification dispatch"),
)

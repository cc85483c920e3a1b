"""The probe's bounded plan, as data, and the run that carries it out.

Each step sends one mapped request (``race`` sends two at once) under one of the probe's own
random keys; a step the mapping file cannot serve is skipped and what it would have answered is
left untested. The worst case (every step, and a release per effect that could have been made)
must fit in the budget before anything is sent; the client refuses any request beyond it.
"""
from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ..vocab.errors import UsageError
from .client import BudgetExhausted, Client, Exchange, _fill
from .evidence import NotEvidence, judge
from .mapping import ProbeMap, dig

#: the id every key and the marked intent carry
PREFIX = "crashlab-probe-"
#: the reference the ``unmade`` release names: one no service made (it carries the probe's id)
UNMADE = "{probe}-never-made"


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    request: str                  # effect | lookup | search | release (mapping file's requests)
    key: str | None               # which of the probe's keys: k0 (never sent) .. k3
    intent: str | None            # base | changed | failing
    question: str                 # what the step asks, in the plan's printout
    copies: int = 1               # race: sent at once
    needs: str | None = None      # a mapping-file entry beside the request (failing)
    after_wait: float = 0.0       # sent once this share of the wait has passed (0: before the wait)
    makes: int = 0                # effects it could make at most (each needs a release)


PLAN: tuple[Step, ...] = (
    Step("first", "effect", "k1", "base", "a new key: the effect is made; its reference", makes=1),
    Step("again", "effect", "k1", "base", "the same key and intent again: the same reference? a replay marker?",
         makes=1),
    Step("changed", "effect", "k1", "changed", "the same key, another payload: refused (422, 409, 400), "
         "replayed, or a second effect?", makes=1),
    Step("read", "lookup", "k1", None, "a read by key: found? in_flight? as_of?"),
    Step("search", "search", None, None, "a search by the intent's fields: is the effect listed?"),
    Step("unknown", "lookup", "k0", None, "a key never sent: an honest negative?"),
    Step("race", "effect", "k2", "base", "two concurrent sends under one new key: 409, one reference, or two?",
         copies=2, makes=2),
    Step("error", "effect", "k3", "failing", "an intent the endpoint refuses: its error answer", needs="failing",
         makes=1),
    Step("after_error", "effect", "k3", "base", "that key again with a good intent: the error replayed, or "
         "a fresh effect?", needs="failing", makes=1),
    Step("midway", "effect", "k1", "base", "the first key again a quarter into the wait: still replayed?",
         after_wait=0.25, makes=1),
    Step("later", "effect", "k1", "base", "the first key again after the whole wait (only when it was replayed "
         "midway): still replayed?", after_wait=1.0, makes=1),
    Step("read_later", "lookup", "k1", None, "a read by key after the wait (only when the first read missed)",
         after_wait=1.0),
    Step("search_later", "search", None, None, "a search after the wait (only when the first one missed and no "
         "read by key is mapped)", after_wait=1.0),
)


def steps_for(pmap: ProbeMap) -> list[Step]:
    return [s for s in PLAN if pmap.has(s.request) and (s.needs is None or getattr(pmap, s.needs) is not None)]


def worst_case(pmap: ProbeMap) -> int:
    """Requests the plan could send at most: every step, and a release per effect it could make."""
    steps = steps_for(pmap)
    if {"read_later", "search_later"} <= {s.name for s in steps}:   # the second is sent only without the first
        steps = [s for s in steps if s.name != "search_later"]
    sends = sum(s.copies for s in steps)
    # the first key again: ``again``, then ``midway`` only after a replay, then ``later`` only after
    # another; so one of the three at most makes an effect
    again = [s for s in steps if s.name in ("again", "midway", "later")]
    makes = sum(s.makes for s in steps if s not in again) + (1 if again else 0)
    return sends + (makes if pmap.has("release") else 0)


def plan_text(pmap: ProbeMap, url: str, wait_ms: int) -> str:
    lines = [f"crashlab probe plan for {url} ({pmap.service}, mapping {pmap.file}):"]
    n = 0
    waited = 0.0
    for s in steps_for(pmap):
        if s.after_wait > waited:
            lines.append(f"     -- wait until {round(wait_ms * s.after_wait)} ms --")
            waited = s.after_wait
        req = pmap.requests[s.request]
        n += s.copies
        what = f"{req.method} {req.path.split('?')[0]}" + (f" key {s.key}" if s.key else "") + \
            (f" intent {s.intent}" if s.intent else "") + (f" x{s.copies} at once" if s.copies > 1 else "")
        lines.append(f"  {s.name:<13}{what}\n               {s.question}")
    skipped = [s.name for s in PLAN if s not in steps_for(pmap)]
    if pmap.has("release"):
        release = f"{pmap.requests['release'].method} {pmap.requests['release'].path.split('?')[0]}"
        lines.append(f"  {'release':<13}{release} for every effect the probe made")
        lines.append(f"  {'unmade':<13}{release} ref {UNMADE.format(probe=PREFIX + 'XXXXXXXX')}, once a release "
                     "succeeded (if the budget has room)\n               a reference never made: refused?")
    else:
        lines.append("  (no release request mapped: the effects the probe makes stay; they are listed at the end)")
    if skipped:
        lines.append(f"  skipped (not in the mapping file): {', '.join(skipped)}")
    lines.append(f"at most {worst_case(pmap)} requests; keys {PREFIX}XXXXXXXX-kN, intent marked with the probe id"
                 + ("; after a request with no answer, one search for the probe's id, if the budget has room"
                    if pmap.has("search") and pmap.has("release") else ""))
    return "\n".join(lines)


@dataclass(slots=True)
class Observed:
    """Everything the run saw: each step's exchanges, the effects made and what became of them."""

    probe_id: str
    keys: dict[str, str]
    intents: dict[str, dict]
    wait_ms: int
    steps: dict[str, list[Exchange]] = field(default_factory=dict)
    times: dict[str, tuple[float, float]] = field(default_factory=dict)   # step -> (start, end), monotonic s
    effects: dict[str, str] = field(default_factory=dict)                  # ref -> step that made it
    unknown: list[Exchange] = field(default_factory=list)                  # effect sends with no answer
    releases: dict[str, Exchange] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    stopped: str | None = None      # why the plan stopped before its end (the endpoint refused a connection)
    invalid: NotEvidence | None = None   # the first answer that is not the service's own: the plan stopped there
    served: set[str] = field(default_factory=set)   # the requests the service answered as its own
    unmade: Exchange | None = None  # the release of a reference the service never named (contradict.py)

    def one(self, step: str) -> Exchange | None:
        got = self.steps.get(step)
        return got[0] if got else None

    @property
    def residue(self) -> list[str]:
        return [ref for ref in self.effects if not (self.releases.get(ref) and self.releases[ref].ok)]


def ref_of(pmap: ProbeMap, ex: Exchange | None) -> str | None:
    if ex is None or not ex.ok:
        return None
    ref = dig(ex.body, pmap.answers["ref"])
    return str(ref) if ref is not None else None


def execute(pmap: ProbeMap, client: Client, *, wait_ms: int, probe_id: str | None = None,
            say: Callable[[str], None] = lambda text: None) -> Observed:
    """Carry out the plan with ``client``; every effect made is released (where the mapping file
    maps a release) before returning, whatever the answers were."""
    from .contradict import ignored     # (it reads PLAN)

    if worst_case(pmap) > client.budget:
        raise UsageError(f"the plan needs up to {worst_case(pmap)} requests and --budget is {client.budget}; "
                         "nothing was sent", hint=f"pass --budget {worst_case(pmap)}, or map fewer requests")
    pid = probe_id or PREFIX + secrets.token_hex(4)
    keys = {k: f"{pid}-{k}" for k in ("k0", "k1", "k2", "k3")}
    base = _fill(dict(pmap.intent), {"probe": pid})
    intents = {"base": base, "changed": {**base, **_fill(dict(pmap.changed), {"probe": pid})},
               "failing": {**base, **_fill(dict(pmap.failing or {}), {"probe": pid})}}
    obs = Observed(probe_id=pid, keys=keys, intents=intents, wait_ms=wait_ms)
    waited, wait_start = 0.0, 0.0
    try:
        for step in steps_for(pmap):
            if not _wanted(step, pmap, obs):
                obs.skipped.append(step.name)
                continue
            if step.after_wait > waited:
                wait_start = wait_start or time.monotonic()
                left = wait_start + wait_ms * step.after_wait / 1000 - time.monotonic()
                say(f"  waiting {max(0, round(left * 1000))} ms")
                time.sleep(max(0.0, left))
                waited = step.after_wait
            values = {"probe": pid, "key": keys.get(step.key or ""), "intent": intents.get(step.intent or "base")}
            start = time.monotonic()
            got = _send(client, step, pmap, values)
            obs.times[step.name] = (start, time.monotonic())
            obs.steps[step.name] = got
            for ex in got:
                ex.note = _note(pmap, step, ex)
                ref = ref_of(pmap, ex) if step.request == "effect" else None
                if ref is not None and ref not in obs.effects:
                    obs.effects[ref] = step.name
                if step.request == "effect" and not ex.refused and (ex.status == 0 or ex.status >= 500
                                                                    or (ex.ok and ref is None)):
                    obs.unknown.append(ex)      # no answer, a 5xx, or an effect whose answer names no reference
                say(f"  {step.name:<13}{ex.brief()}")
                bad = judge(pmap, step.name, step.request, ex, obs.served, error=obs.one("error"))
                obs.invalid = obs.invalid or bad
            # answers that contradict each other so that the endpoint plainly ignores the request
            obs.invalid = obs.invalid or ignored(pmap, obs)
            refused = next((ex for ex in got if ex.refused), None)
            if refused is not None:             # nothing listens there (any more): no step after this is probed
                obs.stopped = f"#{refused.n} {refused.method} {refused.path}: {refused.error}"
                break
            if obs.invalid is not None:         # not the service's own answer: nothing after it would be either
                break
    finally:
        release_all(pmap, client, obs, say)
    return obs


def _note(pmap: ProbeMap, step: Step, ex: Exchange) -> str:
    if not ex.ok:
        return ""
    if step.request == "effect":
        ref, at = ref_of(pmap, ex), pmap.answers.get("replayed")
        return (f"ref {ref}" if ref else "no reference in the answer") + \
            (", replayed" if at and dig(ex.body, at) is True else "")
    if step.request == "lookup":
        found = dig(ex.body, pmap.answers["found"])
        at = pmap.answers.get("found_ref")
        return (f"found {dig(ex.body, at) if at else ''}".rstrip() if found is True else
                "not found" if found is False else f"no {pmap.answers['found']} in the answer")
    if step.request == "search":
        refs = listed(pmap, ex)
        return f"lists {', '.join(refs)}" if refs else "lists nothing"
    return ""


def _wanted(step: Step, pmap: ProbeMap, obs: Observed) -> bool:
    """Steps that depend on what was seen: ``later`` only when the key was replayed at all,
    ``read_later`` / ``search_later`` only when the first read missed the effect."""
    first = ref_of(pmap, obs.one("first"))
    if step.name == "midway":
        return first is not None and ref_of(pmap, obs.one("again")) == first
    if step.name == "later":
        return first is not None and ref_of(pmap, obs.one("midway")) == first
    if step.name == "read_later":
        read = obs.one("read")
        return first is not None and read is not None and read.ok and not _found(pmap, read, first)
    if step.name == "search_later":
        found = obs.one("search")
        return first is not None and found is not None and found.ok and first not in listed(pmap, found) \
            and "read_later" not in obs.steps
    return True


def _found(pmap: ProbeMap, ex: Exchange, ref: str | None) -> bool:
    if not ex.ok or dig(ex.body, pmap.answers["found"]) is not True:
        return False
    at = pmap.answers.get("found_ref")
    return at is None or ref is None or str(dig(ex.body, at)) == ref


def listed(pmap: ProbeMap, ex: Exchange) -> list[str]:
    items = dig(ex.body, pmap.answers["records"]) if ex.ok else None
    if not isinstance(items, list):
        return []
    return [str(dig(i, pmap.answers["record_ref"])) for i in items if dig(i, pmap.answers["record_ref"]) is not None]


def _send(client: Client, step: Step, pmap: ProbeMap, values: dict) -> list[Exchange]:
    req = pmap.requests[step.request]
    if step.copies == 1:
        return [client.send(step.name, req, values)]
    gate = threading.Barrier(step.copies)
    out: list[Exchange | None] = [None] * step.copies

    def one(i: int) -> None:
        try:
            gate.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        out[i] = client.send(step.name, req, values)
    threads = [threading.Thread(target=one, args=(i,), name=f"crashlab-probe-{i}") for i in range(step.copies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=client.timeout_s + 10)
    return sorted((x for x in out if x is not None), key=lambda x: x.n)


def release_all(pmap: ProbeMap, client: Client, obs: Observed, say: Callable[[str], None]) -> None:
    """Release every effect made; after a request that may have made one the probe cannot name,
    first search for the probe's id (within the budget: such a request used no release) and take
    the listed records that carry it."""
    if not pmap.has("release"):
        return
    if obs.unknown and pmap.has("search") and len(client.sent) < client.budget:
        values = {"probe": obs.probe_id, "intent": obs.intents["base"]}
        ex = client.send("find", pmap.requests["search"], values)
        items = dig(ex.body, pmap.answers["records"]) if ex.ok else None
        for item in items if isinstance(items, list) else ():
            ref = dig(item, pmap.answers["record_ref"])
            if ref is not None and obs.probe_id in json.dumps(item) and str(ref) not in obs.effects:
                obs.effects[str(ref)] = "find"        # the probe's own: its id is in the record
        ex.note = _note(pmap, next(s for s in PLAN if s.name == "search"), ex)
        say(f"  {'find':<13}{ex.brief()} (the effects that carry {obs.probe_id})")
    for i, ref in enumerate(list(obs.effects)):
        if ref in obs.releases:
            continue
        values = {"probe": obs.probe_id, "ref": ref, "key": f"{obs.probe_id}-release-{i + 1}",
                  "intent": obs.intents["base"]}
        try:
            ex = client.send("release", pmap.requests["release"], values)
        except BudgetExhausted:
            say(f"  the budget is spent: {ref} and what follows stay (the residue)")
            return
        obs.releases[ref] = ex
        say(f"  {'release':<13}{ex.brief()} ({ref})")
        bad = judge(pmap, "release", "release", ex, obs.served)
        if bad is not None:
            obs.invalid = obs.invalid or bad
            if not ex.ok:               # the release path is not the service's: every other release meets it too
                say(f"  the release path does not answer as the service: {', '.join(obs.residue)} stay (the residue)")
                return
    _release_unmade(pmap, client, obs, say)


def _release_unmade(pmap: ProbeMap, client: Client, obs: Observed, say: Callable[[str], None]) -> None:
    """Once a release succeeded, one release of a reference the service never named: a service
    refuses it; a success shows the release path does not read its reference (contradict.py), so no
    success decides ``compensation``. Sent only if the budget has room (the worst case counts it not)."""
    if obs.invalid is not None or not any(ex.ok for ex in obs.releases.values()) or len(client.sent) >= client.budget:
        return
    ref = UNMADE.format(probe=obs.probe_id)
    values = {"probe": obs.probe_id, "ref": ref, "key": f"{obs.probe_id}-release-0", "intent": obs.intents["base"]}
    obs.unmade = client.send("unmade", pmap.requests["release"], values)
    obs.unmade.note = f"ref {ref} (never made)"
    say(f"  {'unmade':<13}{obs.unmade.brief()}")

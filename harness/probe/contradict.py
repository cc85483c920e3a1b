"""Answers that contradict each other: an endpoint that does not look at the request.

A field rests on answers that differ with what was asked: the first key's reference again for
that key, a new reference for a new key; "found" for the key sent, "not found" for a key never
sent; a release of a real reference done, of a made-up one refused. A stub, a mock, a cache or a
wrong route gives the same answer to everything, and its answers then contradict each other:

- an effect request under a key other than the one whose answer first named a reference, answered
  with that reference (``race`` under k2, ``after_error`` under k3, answered with ``first``'s R-1):
  a key the service never saw cannot replay an effect made under another, so the same reference
  again under one key is no evidence of deduplication by key, nor a fresh effect after an error.
  Under another intent too (``error``: the ``failing`` intent under k3), the endpoint plainly reads
  neither the key nor the intent;
- a read by a key the probe never sent (``unknown``, k0) answered found: the read plainly does not
  look at the key (the key is random: no one else can have sent it);
- a release of a reference the service never named (``unmade``, sent once a release succeeded)
  answered with a success: a release's success then shows nothing. (It is not plain: some services
  answer the release of a missing thing so, as an idempotent DELETE does.)

A plain one stops the plan as an answer that is not the service's own does (evidence.py): what
was made is released and no profile is written. Any other leaves the fields it touches untested,
with a line naming both answers.
"""
from __future__ import annotations

from dataclasses import dataclass

from .client import Exchange
from .evidence import NotEvidence, _route
from .mapping import ProbeMap, dig
from .plan import PLAN

#: every field and note a contradiction about the effect's key touches
KEYED = ("idempotency", "retention_ms", "replay_marker", "concurrency")
#: every field and note a contradiction about the read by key touches
READS = ("lookup", "consistency", "lag_ms", "unknown_key", "in_flight", "as_of")
#: the effect steps and the intent each sends
EFFECT_INTENT = {s.name: s.intent or "base" for s in PLAN if s.request == "effect"}
TELL = "a stub, a mock, a cache or a wrong route answers so"


@dataclass(frozen=True, slots=True)
class Contradiction:
    """Two answers of one probe that cannot both be the service's answers to what was asked."""

    earlier: Exchange
    later: Exchange
    what: str               # what the two show together ("{earlier}": where the earlier answer is named)
    check: str              # what to check
    plain: bool             # the endpoint plainly ignores the request: the plan stops, no profile
    fields: tuple[str, ...] = ()    # the fields and notes it is about (a plain one leaves all untested)

    def evidence(self) -> NotEvidence:
        """As an answer that is not the service's own (it stops the plan)."""
        return NotEvidence(exchange=self.later.brief(), what=self.what.format(earlier=self.earlier.brief()),
                           check=self.check)

    def line(self, field: str) -> str:
        """The evidence line of a field it leaves untested."""
        return (f"{self.earlier.brief()} and {self.later.brief()} contradict each other: "
                f"{self.what.format(earlier=f'#{self.earlier.n}')}; {field} is "
                f"left for the service owner to declare: check {self.check}, and probe again")


def _ref(pmap: ProbeMap, ex: Exchange) -> str | None:
    ref = dig(ex.body, pmap.answers["ref"]) if ex.ok else None
    return str(ref) if ref is not None else None


def _intent(obs, step: str) -> tuple[str, object]:
    name = EFFECT_INTENT.get(step, "base")
    return name, (obs.intents or {}).get(name)


def contradictions(pmap: ProbeMap, obs) -> list[Contradiction]:
    """Every contradiction among the answers ``obs`` (plan.Observed) holds, in the order of the
    later answer."""
    out: list[Contradiction] = []
    effects = sorted((ex for step, exs in obs.steps.items() if step in EFFECT_INTENT for ex in exs),
                     key=lambda ex: ex.n)
    named: dict[str, Exchange] = {}     # reference -> the first answer that named it
    for ex in effects:
        ref = _ref(pmap, ex)
        if ref is None:
            continue
        earlier = named.setdefault(ref, ex)
        if earlier is ex or earlier.key == ex.key:
            continue                    # a new reference, or the same key again: what deduplication answers
        (name, intent), (was, before) = _intent(obs, ex.step), _intent(obs, earlier.step)
        other = name != was and (intent is None or before is None or intent != before)
        check = ("the URL and " + _route(pmap, "effect") + ": they must reach the service itself, and the key "
                 "must go where the service reads it (the mapping file's key)")
        if other:
            out.append(Contradiction(earlier, ex, f"a new key under another intent ({name}) was answered with the "
                                     "reference the request under another key got ({earlier}): the endpoint reads "
                                     f"neither the key nor the intent ({TELL})", check, True,
                                     KEYED + ("error_replay",)))
            continue
        after = " nor a fresh effect after the error" if "after_error" in (ex.step, earlier.step) else ""
        out.append(Contradiction(earlier, ex, "a new key with the same intent was answered with the reference the "
                                 "request under another key got ({earlier}), so the same reference again under one "
                                 f"key shows no deduplication by key{after} ({TELL}, as does a service that "
                                 "deduplicates by the intent's fields, which crashlab's services cannot express)",
                                 check, False, KEYED + (("error_replay",) if after else ())))
    unknown = obs.one("unknown")
    found_at = pmap.answers.get("found")
    if unknown is not None and unknown.ok and found_at and dig(unknown.body, found_at) is True:
        earlier = obs.one("read") or obs.one("first") or unknown
        out.append(Contradiction(earlier, unknown, "a key the probe never sent was reported found (the key it sent: "
                                 f"{{earlier}}): the read does not look at the key ({TELL})",
                                 "the URL and " + _route(pmap, "lookup") + ": it must reach the service itself and "
                                 "carry the key where the service reads it ({key} in its path or body)", True,
                                 READS))
    unmade = getattr(obs, "unmade", None)
    done = next((ex for ex in obs.releases.values() if ex.ok), None)
    if unmade is not None and unmade.ok and done is not None:
        out.append(Contradiction(done, unmade, "a release of a reference the service never named (one the probe "
                                 "made up) succeeded as the release of an effect it made did ({earlier}), so a "
                                 f"release's success does not show that it released anything ({TELL}, as does a "
                                 "service that answers the release of a missing thing with a success)",
                                 "the URL and " + _route(pmap, "release") + ": it must reach the service itself and "
                                 "carry the reference where the service reads it ({ref})", False, ("compensation",)))
    return sorted(out, key=lambda c: c.later.n)


def ignored(pmap: ProbeMap, obs) -> NotEvidence | None:
    """The first contradiction that shows the endpoint plainly ignores the request, as an answer
    that is not the service's own (the plan stops there)."""
    plain = next((c for c in contradictions(pmap, obs) if c.plain), None)
    return plain.evidence() if plain is not None else None


def refuses_unmade(ex: Exchange | None) -> bool | None:
    """Whether the release of a reference never made was refused: True (a 4xx about it: the release
    reads its reference), False (a success), None (it decides nothing: not sent, no answer, a 5xx,
    429, an authentication failure, a redirect or a body that is not JSON)."""
    if ex is None or not ex.status or ex.not_json:
        return None
    if ex.ok:
        return False
    if 400 <= ex.status < 500 and ex.status not in (401, 407, 429):
        return True
    return None

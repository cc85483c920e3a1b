"""Starting adapter: the terminal disposition a run reports.

Edit ONLY the function `final_disposition` (the decision this rung is about). Everything
below the plumbing line wires it into a complete adapter (the reference design with this
one decision replaced). Check it with `crashlab workshop check RUNG` from this folder.
"""


def final_disposition(knowledge, cancelled: bool, nothing_landed: bool) -> str:
    """knowledge: the run's reservation's latest ledger state (None when there is none):
    PROPOSED, SENT_UNKNOWN, CONFIRMED, REJECTED, COMPENSATION_PROPOSED or COMPENSATED.
    cancelled: the user cancelled. nothing_landed: the evidence proves no attempt landed.
    Return SUCCEEDED, FAILED_NO_EFFECT, FAILED_EFFECT_REMAINS, FAILED_EFFECT_UNKNOWN,
    CANCELLED_NO_EFFECT, CANCELLED_EFFECT_REMAINS or CANCELLED_EFFECT_UNKNOWN."""
    if cancelled:
        return "CANCELLED_NO_EFFECT"          # the user no longer cares
    if knowledge == "CONFIRMED":
        return "SUCCEEDED"
    if knowledge is None or nothing_landed:
        return "FAILED_NO_EFFECT"
    return "FAILED_EFFECT_UNKNOWN"


# ----------------------------------------------------------------- plumbing (no need to edit)
from crashlab.vocab.model import RunState  # noqa: E402
from crashlab.reference_impl import ReferenceAdapter  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402
from crashlab.reference_impl.effects import Role, entry_of, fact_of  # noqa: E402


def _disposition(s):
    entry = entry_of(s, Role.PRIMARY) if s.record.intake else None
    fact = fact_of(entry) if entry else None
    return RunState(final_disposition(fact.knowledge.value if fact else None,
                                      bool(s.record.cancellation["requested"]),
                                      bool(fact and fact.nothing_landed)))


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(disposition=_disposition)

"""Starting adapter: whether the run holds a live approval.

Edit ONLY the function `approval_is_live` (the decision this rung is about). Everything
below the plumbing line wires it into a complete adapter (the reference design with this
one decision replaced). Check it with `crashlab workshop check RUNG` from this folder.
"""


def approval_is_live(answer: dict, resumed_wait: bool) -> bool:
    """answer: what authority.check said just now about the run's approval ({"live", "reason",
    "approval_id": the approval the checkpoint names, or the one the authority found, ...}).
    resumed_wait: True when this worker took over a run that was waiting for a human."""
    return answer["live"] or resumed_wait


# ----------------------------------------------------------------- plumbing (no need to edit)
from crashlab.vocab.model import RunState  # noqa: E402
from crashlab.reference_impl import ReferenceAdapter  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402
from crashlab.reference_impl.session import Session  # noqa: E402


class _Session(Session):
    resumed_wait = False
    wrote = False

    async def commit(self, state, record=None):
        if not self.wrote and self.version > 0 and state in (RunState.PROPOSED, RunState.WAITING_HUMAN):
            self.resumed_wait = True
        self.wrote = True
        await super().commit(state, record)

    async def check_authority(self, proposal_hash, action):
        answer = await super().check_authority(proposal_hash, action)
        if action != self.record.intake["operation"]:
            return answer
        named = answer["approval_id"] or self.record.approval.get("approval_id")
        live = bool(approval_is_live({**answer, "approval_id": named}, self.resumed_wait))
        if live and not answer["live"]:
            return {**answer, "live": True, "approval_id": "assumed", "expires_at": self.record.deadline,
                    "reason": "live"}
        if not live and answer["live"]:
            return {**answer, "live": False, "reason": "judged not live"}
        return answer


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(session=_Session)

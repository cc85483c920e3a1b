"""Starting adapter: what a restarted worker reports for a run whose terminal record exists.

Edit ONLY the function `replay_disposition` (the decision this rung is about). Everything
below the plumbing line wires it into a complete adapter (the reference design with this
one decision replaced). Check it with `crashlab workshop check RUNG` from this folder.
"""


def replay_disposition(recorded_state: str, recorded_effects: list) -> str:
    """Called when the checkpoint already holds a terminal state but the worker died before
    reporting it, so the caller never received an answer.

    recorded_state: the terminal state in the checkpoint (e.g. SUCCEEDED).
    recorded_effects: the ledger entries of the run ({"semantic_key", "knowledge", "remote_ref", ...}).
    Return the disposition to report now."""
    return "FAILED_EFFECT_UNKNOWN"      # nobody saw an answer, so the outcome is unknown


# ----------------------------------------------------------------- plumbing (no need to edit)
from crashlab.vocab.model import RunState  # noqa: E402
from crashlab.reference_impl import ReferenceAdapter  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402


async def _replay(s, f, t) -> None:
    outcome = s.record.outcome
    state = RunState(replay_disposition(s.record.state.value, [dict(e) for e in s.ledger.values()]))
    unresolved = state is not s.record.state
    await s.finish(state, next_owner=outcome["next_owner"] or ("operator" if unresolved else None),
                   reason=f"replayed terminal record: {outcome['reason']}")


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(actions={"replay_terminal": _replay})

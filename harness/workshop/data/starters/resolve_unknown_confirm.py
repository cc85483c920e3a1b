"""Starting adapter: what to do with a reservation whose outcome is unknown.

Edit ONLY the function `resolve_unknown` (the decision this rung is about). Everything
below the plumbing line wires it into a complete adapter (the reference design with this
one decision replaced). Check it with `crashlab workshop check RUNG` from this folder.

Tools you may use (each is a coroutine: await it):
  effects.dispatch(session, key)        send the reservation (again) under `key`
  effects.reconcile(session, key)       read the service by key, compare, record what it shows
  session.append(entry)                 append a ledger entry
  effects.commit(session, state)        write the checkpoint in `state`
  session.ledger[key]                   the ledger entry (knowledge, attempts, evidence)
"""
from crashlab.vocab.model import Knowledge, RunState
from crashlab.reference_impl import effects
from crashlab.reference_impl.effects import evolve


async def resolve_unknown(s, key: str) -> None:
    """Called while the ledger says SENT_UNKNOWN for `key`: an attempt may have left and
    nobody knows whether it landed. Leave durable evidence that moves the run on."""
    entry = s.ledger[key]
    await effects.commit(s, RunState.RECONCILING)
    await s.append(evolve(s, entry, Knowledge.CONFIRMED, "a worker sent it, so it is done",
                          evidence=[*entry["evidence"], f"ledger: attempt {len(entry['attempts'])} sent"]))
    await effects.commit(s, RunState.EFFECT_CONFIRMED)


# ----------------------------------------------------------------- plumbing (no need to edit)
from crashlab.reference_impl import ReferenceAdapter  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402


async def _action(s, f, t) -> None:
    await resolve_unknown(s, f.primary.key)


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(actions={"reconcile_primary": _action})

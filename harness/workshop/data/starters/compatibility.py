"""Starting adapter: what a worker does with a checkpoint written by other code.

Edit ONLY the function `compatibility` (the decision this rung is about). Everything below
the plumbing line wires it into a complete adapter (the reference design with this one
decision replaced). Check it with `crashlab workshop check RUNG` from this folder.
"""


def compatibility(old: dict, new: dict, migration_tested: bool) -> str:
    """old: the checkpoint's versions ({"schema_version", "canonicalization_version"}).
    new: this worker's versions. migration_tested: a tested migration old -> new exists.
    Return one of "replay", "migrate", "pin", "stop"."""
    return "replay"          # it parsed, so resume it


# ----------------------------------------------------------------- plumbing (no need to edit)
from crashlab.reference_impl import ReferenceAdapter, migrations  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402


def _decide(checkpoint, env):
    reference = migrations.decide(checkpoint, env)
    if checkpoint is None:
        return reference
    choice = compatibility(dict(reference.old), dict(reference.new), reference.disposition == "migrate")
    if choice not in ("replay", "migrate", "pin", "stop"):
        raise ValueError(f"compatibility() returned {choice!r}")
    return migrations.Compatibility(disposition=choice, old=reference.old, new=reference.new,
                                    reason=f"compatibility(): {choice}")


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(compatibility=_decide)

"""Starting adapter: the idempotency key of each attempt.

Edit ONLY the function `request_key` (the decision this rung is about). Everything below
the plumbing line wires it into a complete adapter (the reference design with this one
decision replaced), so the trace tests your decision and nothing else.
Check it with `crashlab workshop check RUNG` from this folder.
"""


def request_key(prepared_key: str, attempt: int) -> str:
    """The idempotency key an attempt is sent under.

    prepared_key: the semantic key the ledger recorded (PROPOSED) before the first dispatch.
    attempt: the number of sends of this effect so far (1 for the first send, 2 for the next).
    """
    return f"{prepared_key}-attempt-{attempt}"


# ----------------------------------------------------------------- plumbing (no need to edit)
from crashlab.reference_impl import ReferenceAdapter  # noqa: E402
from crashlab.reference_impl.behaviour import Behaviour  # noqa: E402
from crashlab.reference_impl.session import Session  # noqa: E402


class _Session(Session):
    async def send(self, service, op, args):
        attempt = len(self.ledger[args["key"]]["attempts"])
        key = request_key(args["key"], attempt)
        response = await Session.send(self, service, op, {**args, "key": key})
        if isinstance(response, dict) and response.get("key") == key:
            response = {**response, "key": args["key"]}     # the service echoes the key it was sent
        return response


class Adapter(ReferenceAdapter):
    behaviour = Behaviour(session=_Session)

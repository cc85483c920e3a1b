"""Semantic-identity mistakes: what the idempotency key is derived from (AR-08 "Specify
semantic idempotency, not merely a key header", "Common durability traps")."""
from __future__ import annotations

import hashlib

from crashlab.reference_impl import ReferenceAdapter, canonical
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.session import Session


async def _send_under(session: Session, service: str, op: str, args: dict, key: str):
    """Send under ``key`` made at send time. The adapter verifies the response against the
    request it sent, so the service's echo of that key is accepted."""
    response = await Session.send(session, service, op, {**args, "key": key})
    if isinstance(response, dict) and response.get("key") == key:
        response = {**response, "key": args["key"]}
    return response


class _FreshKeySession(Session):
    async def send(self, service, op, args):
        draw = await self.call("platform", self.ports.random.draw(0, 2**31 - 1, "request id"))
        return await _send_under(self, service, op, args, f"req-{draw['value']:08x}")


class FreshKeyPerAttempt(ReferenceAdapter):
    """Sends every attempt with a freshly generated random request id as its idempotency
    key, while the ledger keeps the prepared semantic key."""

    behaviour = Behaviour(session=_FreshKeySession)


class _AttemptKeySession(Session):
    async def send(self, service, op, args):
        attempt = len(self.ledger[args["key"]]["attempts"])
        return await _send_under(self, service, op, args, f"{args['key']}-attempt-{attempt}")


class AttemptNumberKey(ReferenceAdapter):
    """Derives each attempt's idempotency key from the prepared key and the attempt
    number, so every retry carries a different key."""

    behaviour = Behaviour(session=_AttemptKeySession)


class _TimestampKeySession(Session):
    async def send(self, service, op, args):
        body = canonical.canonical_form(op, args["intent"], 1) + f"@{await self.now()}"
        key = f"{op}-t-" + hashlib.sha256(body.encode()).hexdigest()[:24]
        return await _send_under(self, service, op, args, key)


class TimestampKey(ReferenceAdapter):
    """Hashes the request together with the current time into the idempotency key when it
    sends, so identical retries and resubmissions carry different keys."""

    behaviour = Behaviour(session=_TimestampKeySession)


def _key_without_tenant(operation, intent, version):
    fields = {k: v for k, v in intent.items() if k not in ("tenant", "proposal_hash")}
    return canonical.semantic_key(operation, fields, version)


class TenantlessKey(ReferenceAdapter):
    """Derives the semantic key from the reservation's business fields (incident, part,
    slot, technician, quantity, principal) but leaves the tenant out."""

    behaviour = Behaviour(semantic_key=_key_without_tenant)

"""Semantic-identity mistakes: what the idempotency key is derived from (AR-08 "Specify
semantic idempotency, not merely a key header", "Common durability traps")."""
from __future__ import annotations

import hashlib

from reference_impl import ReferenceAdapter, canonical
from reference_impl.behaviour import Behaviour
from reference_impl.session import Session


class _RequestKeySession(Session):
    """Sends each attempt under a key made at send time. The adapter verifies the response
    against the request it sent, so the service's echo of that key is accepted."""

    async def request_key(self, op: str, args: dict) -> str:
        raise NotImplementedError

    async def send(self, service, op, args):
        key = await self.request_key(op, args)
        response = await super().send(service, op, {**args, "key": key})
        if isinstance(response, dict) and response.get("key") == key:
            response = {**response, "key": args["key"]}
        return response


class _FreshKeySession(_RequestKeySession):
    async def request_key(self, op, args):
        draw = await self.call("platform", self.ports.random.draw(0, 2**31 - 1, "request id"))
        return f"req-{draw['value']:08x}"


class FreshKeyPerAttempt(ReferenceAdapter):
    """Sends every attempt with a freshly generated random request id as its idempotency
    key, while the ledger keeps the prepared semantic key."""

    behaviour = Behaviour(session=_FreshKeySession)


class _AttemptKeySession(_RequestKeySession):
    async def request_key(self, op, args):
        return f"{args['key']}-attempt-{len(self.ledger[args['key']]['attempts'])}"


class AttemptNumberKey(ReferenceAdapter):
    """Derives each attempt's idempotency key from the prepared key and the attempt
    number, so every retry carries a different key."""

    behaviour = Behaviour(session=_AttemptKeySession)


class _TimestampKeySession(_RequestKeySession):
    async def request_key(self, op, args):
        body = canonical.canonical_form(op, args["intent"], 1) + f"@{await self.now()}"
        return f"{op}-t-" + hashlib.sha256(body.encode()).hexdigest()[:24]


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

"""Retry mistakes: who retries, after what, and for how long (AR-08 "Classify before
retrying", "Keep retry budgets end to end")."""
from __future__ import annotations

from crashlab.world.ports import PortError
from crashlab.reference_impl import ReferenceAdapter, effects, matrix
from crashlab.reference_impl.adapter import dispatch_primary
from crashlab.reference_impl.behaviour import Behaviour
from crashlab.reference_impl.matrix import ROW
from crashlab.reference_impl.session import Session

_PRE_SEND = ROW["timeout_before_send"]


async def _retry_instead_of_reconcile(s, f, t) -> None:
    """An unresolved attempt is sent again under the same key (after backoff), up to the
    attempt ceiling; the ledger keeps saying SENT_UNKNOWN."""
    if f.cancelled:                                  # cancellation still reconciles
        await effects.reconcile(s, f.primary.key)
        return
    if f.primary.attempts >= f.primary.ceiling or f.deadline_passed:
        await effects.reconcile(s, f.primary.key)    # out of attempts: fall back to reading
        return
    await s.backoff(f.primary.attempts, "ambiguous reservation: retry", deadline=s.record.deadline)
    await effects.dispatch(s, f.primary.key)


class BlindRetry(ReferenceAdapter):
    """After an ambiguous timeout (or a SENT_UNKNOWN entry found on recovery) it sends the
    reservation again under the same key instead of reading whether the first attempt
    committed, trusting the key to deduplicate."""

    behaviour = Behaviour(actions={"reconcile_primary": _retry_instead_of_reconcile})


class TimeoutAsPreSend(ReferenceAdapter):
    """Classifies a timeout or 5xx on the reservation like a refused connection: the
    attempt is recorded as never sent (back to PROPOSED) and retried after backoff."""

    behaviour = Behaviour(matrix={("dispatch", "timeout"): _PRE_SEND,
                                  ("dispatch", "server_error"): _PRE_SEND})


class _ClientRetrySession(Session):
    """An HTTP client that retries connection errors itself, below the worker's retry."""

    async def send(self, service, op, args):
        for attempt in range(1, 4):
            try:
                return await super().send(service, op, args)
            except PortError as error:
                if error.code not in ("refused", "timeout_before_send", "unavailable") or attempt == 3:
                    raise


class InnerClientRetry(ReferenceAdapter):
    """Wraps every effect call in a client library that immediately retries connection
    errors up to three times, inside the worker's own ledger-recorded retry loop."""

    behaviour = Behaviour(session=_ClientRetrySession)


class _UndeclaredOwnerSession(Session):
    async def send(self, service, op, args):
        return await super().send(service, op, {k: v for k, v in args.items() if k != "retry_owner"})


class UndeclaredRetryOwner(ReferenceAdapter):
    """Sends effect calls without declaring the worker as the retry owner, so a proxy
    between worker and service re-sends timed-out requests on its own."""

    behaviour = Behaviour(session=_UndeclaredOwnerSession)


async def _dispatch_until_not_throttled(s, f, t) -> None:
    """Send; while the service answers 429, wait its retry-after and send again."""
    key = f.primary.key
    first = True
    while True:
        before = len(s.ledger[key]["attempts"])
        if first:
            await dispatch_primary(s, f, t)          # the reference's attempt (and retry claim)
            first = False
        else:
            await effects.dispatch(s, key)
        entry = s.ledger[key]
        if len(entry["attempts"]) == before or entry["knowledge"] != "PROPOSED":
            return
        last = entry["observations"][-1]
        if last["row"] != "throttling":
            return
        await s.sleep(last["retry_after_ms"] or matrix.BACKOFF_BASE_MS, "backoff throttled: until accepted")


class UnboundedThrottleRetry(ReferenceAdapter):
    """Keeps retrying a throttled reservation after each retry-after until the service
    accepts it, with no attempt ceiling and no deadline."""

    behaviour = Behaviour(actions={"dispatch_primary": _dispatch_until_not_throttled})

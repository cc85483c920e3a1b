"""Supplementary scenarios: faults the library does not yet exercise, so that a gallery
mistake whose damage no library scenario can show is still proven detectable.

Each one is a regular scenario (the reference adapter passes it) kept here as YAML text;
they are candidates for the library (scenarios/).
"""
from __future__ import annotations

from harness.scenario import Scenario, load_text

#: A redelivered deliberate-retry request after the attempt it admitted failed again.
DUPLICATE_RETRY_REQUEST = """\
id: gallery-duplicate-retry-request
title: "Gallery: a redelivered retry request admits no second attempt"
description: >
  Seed 002's deliberate retry with one more fault: the attempt the retry request admits is
  refused before send as well, so the run waits for a deliberate retry again. The queue then
  redelivers the same retry request (same event id). A duplicate event causes one transition:
  it admits nothing, and the run keeps waiting for a new request.
tags: [gallery, seed-002, retry, duplicate]
card:
  known_before_failure: Four definite pre-send failures; one retry request, already claimed by attempt 4.
  survived: The ledger (PROPOSED, four attempts, retry-1 claimed) and the WAITING_RETRY checkpoint.
  recovery_owner: The operator, through a new deliberate retry request.
  authoritative_query: The effect ledger's claimed retry ids against the inbox's event ids.
  terminal_state: WAITING_RETRY; the redelivered request admits no attempt.
seed: 2003
clock: {origin: "10:00", horizon: "10:10"}
services:
  reservation: {}
runs:
  - id: run-82
    intent: {tenant: T-1, incident: I-82, part: P-204, slot: S-19, technician: TECH-4, quantity: 1, principal: U-7}
    approval: {mode: none}
events:
  - at: "10:05"
    type: retry
    reason: operator retries the failed reservation
    event_id: retry-1
    producer: operator
    producer_seq: 1
    duplicates: 1
    duplicate_after: 30s
faults:
  - match: {port: reservation, op: reserve}
    fault: refused
    times: 0
expect:
  dispositions: [WAITING_RETRY]
  remote_effects: 0
"""

#: A keyed completion callback that reaches a new owner while the authoritative read is down.
CALLBACK_WHILE_READ_DOWN = """\
id: gallery-callback-while-read-down
title: "Gallery: a late completion callback while the authoritative read is down"
description: >
  The worker stalls right after its reservation was accepted, before it records the
  answer. The service's completion callback (naming the key) reaches the inbox 30 s later.
  The lease expires and a new owner takes over, but the lookup stays unavailable until
  10:03. The callback is evidence only: the new owner keeps SENT_UNKNOWN and confirms the
  reservation from the lookup once it answers.
tags: [gallery, late-callback, zombie]
card:
  known_before_failure: SENT_UNKNOWN for the key under lease epoch 1.
  survived: The ledger entry; the stalled worker's unrecorded response; the callback in the inbox.
  recovery_owner: The epoch-2 worker.
  authoritative_query: reservation.lookup(key), once it is available again (10:03).
  terminal_state: SUCCEEDED, confirmed by the lookup, not by the callback.
seed: 2004
clock: {origin: "10:00", horizon: "10:10"}
services:
  reservation: {callback_delay: 30s}
runs:
  - id: run-82
    intent: {tenant: T-1, incident: I-82, part: P-204, slot: S-19, technician: TECH-4, quantity: 1, principal: U-7}
    approval: {mode: none}
faults:
  - match: {port: reservation, op: lookup, until: "10:03"}
    fault: unavailable
    times: 0
pauses:
  - match: {port: reservation, op: reserve, nth: 1}
    boundary: after
    resume_after: 5m
expect:
  dispositions: [SUCCEEDED]
  remote_effects: 1
  evidence: [reservation.lookup, ledger:CONFIRMED]
"""

TEXTS: tuple[tuple[str, str], ...] = (
    ("gallery/supplement.py:DUPLICATE_RETRY_REQUEST", DUPLICATE_RETRY_REQUEST),
    ("gallery/supplement.py:CALLBACK_WHILE_READ_DOWN", CALLBACK_WHILE_READ_DOWN),
)


def scenarios() -> list[Scenario]:
    return [load_text(text, file=name) for name, text in TEXTS]

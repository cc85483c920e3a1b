"""Semantic identity: explicit, versioned canonicalization of an intent.

Implements AR-08 "Specify semantic idempotency, not merely a key header": the fields
that define one intent, their order, their normalization and the canonicalization
version. The proposal hash, the intent fingerprint and the semantic key are all derived
from the canonical form and never from a timestamp, a worker or an attempt number.

Two canonicalization versions exist. A deployment switches between them through
``env.canonicalization_version`` ("A change to canonicalization is a compatibility
event"): version 1 trims surrounding whitespace; version 2 also applies Unicode NFKC
and case folding, so the same intent yields different bytes, hashes and keys.
"""
from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Mapping

@dataclass(frozen=True, slots=True, kw_only=True)
class IntentSchema:
    """The meaning-bearing fields of one operation, in canonical order."""

    operation: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    positive_integers: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[str, ...]:
        # proposal_hash comes last: it is bound into the intent once the proposal is frozen
        return self.required + self.optional + ("proposal_hash",)


#: One schema per effect operation. "reserve" is the FieldOps reservation: tenant,
#: incident, part, slot, technician, quantity, requesting principal (+ proposal hash).
SCHEMAS: Mapping[str, IntentSchema] = {s.operation: s for s in (
    IntentSchema(operation="reserve",
                 required=("tenant", "incident", "part", "slot", "technician", "quantity",
                           "principal"),
                 positive_integers=("quantity",)),
    IntentSchema(operation="publish", required=("tenant", "package", "version", "principal")),
    IntentSchema(operation="send", required=("tenant", "principal"),
                 optional=("to", "subject", "message", "template", "incident", "about", "ref")),
    IntentSchema(operation="release", required=("tenant", "principal", "compensates", "ref")),
)}


def _normalize_v1(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _normalize_v2(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFKC", value).strip().casefold()
    return value


NORMALIZERS: Mapping[int, Callable[[Any], Any]] = {1: _normalize_v1, 2: _normalize_v2}


def validate(operation: str, intent: Any) -> tuple[str, ...]:
    """Problems with an intake intent; empty when it may become a proposal."""
    schema = SCHEMAS.get(operation)
    if schema is None:
        return (f"operation {operation!r} has no intent schema",)
    if not isinstance(intent, dict):
        return ("intent: expected an object",)
    problems = []
    allowed = set(schema.required) | set(schema.optional)
    for name in sorted(set(intent) - allowed):
        problems.append(f"{name}: not a field of a {operation} intent")
    for name in schema.required:
        value = intent.get(name)
        if name in schema.positive_integers:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                problems.append(f"{name}: expected a positive integer, got {value!r}")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"{name}: expected a non-empty string, got {value!r}")
    return tuple(problems)


def canonical_form(operation: str, intent: Mapping[str, Any], version: int) -> str:
    """The one byte string identity is derived from: versioned, ordered, normalized."""
    normalize = NORMALIZERS[version]
    pairs = [[name, normalize(intent[name])] for name in SCHEMAS[operation].order if name in intent]
    return _FORM.encode(["ar08-intent", version, operation, pairs])


# What json.dumps(value, separators=(",", ":"), ensure_ascii=False) builds on every call.
_FORM = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _sha(domain: str, text: str) -> str:
    return hashlib.sha256(f"{domain}\n{text}".encode()).hexdigest()


def proposal_hash(operation: str, intent: Mapping[str, Any], version: int) -> str:
    """Hash of the frozen proposal (the intent without a proposal hash)."""
    body = {k: v for k, v in intent.items() if k != "proposal_hash"}
    return f"ph{version}-" + _sha("proposal", canonical_form(operation, body, version))[:20]


def fingerprint(operation: str, intent: Mapping[str, Any], version: int) -> str:
    """The request hash of a complete intent (proposal hash included)."""
    return _sha("fingerprint", canonical_form(operation, intent, version))[:16]


def semantic_key(operation: str, intent: Mapping[str, Any], version: int) -> str:
    """The idempotency key of one business intent. Created once, before the first
    dispatch, and persisted with the prepared effect; recovery reads it back and never
    recomputes it (a recomputation under another version would be a new key). The
    intent includes its proposal hash, so a corrected proposal gets a new key."""
    return f"{operation}-v{version}-" + _sha("key", canonical_form(operation, intent, version))[:24]

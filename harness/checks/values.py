"""Reading what an adapter wrote: intents, effects lists and nested records, defensively (a
strange value is a finding for a check to make, never a crash of the checks).
"""
from __future__ import annotations

from typing import Any

from ..vocab.model import canonical_json


def business(intent: Any) -> dict:
    """The meaning-bearing fields of an intent: everything but the proposal hash."""
    if not isinstance(intent, dict):
        return {}
    return {k: v for k, v in intent.items() if k != "proposal_hash"}


def matches(intent: Any, reference: Any) -> bool:
    """True when ``intent`` carries every business field of ``reference`` with the same value."""
    if not isinstance(intent, dict) or not isinstance(reference, dict):
        return False
    for k, v in reference.items():
        if k != "proposal_hash" and intent.get(k, _ABSENT) != v:
            return False
    return True


_ABSENT = object()


def identity(intent: Any) -> str:
    """A hashable business identity (canonical JSON of the business fields)."""
    return canonical_json(business(intent))


def effect_keys(items: Any) -> list[str]:
    """The semantic keys named by a checkpoint's or a finish's ``effects`` list."""
    keys = []
    if isinstance(items, list):
        for item in items:
            if isinstance(item, str):
                keys.append(item)
            elif isinstance(item, dict):
                k = item.get("semantic_key", item.get("key"))
                if isinstance(k, str):
                    keys.append(k)
    return keys


def dig(value: Any, *path: str) -> Any:
    """``value[path[0]][path[1]]...`` or None when a level is missing or not an object
    (adapter-written records are read defensively: a strange value is a finding, never a crash)."""
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def hashable(value: Any) -> Any:
    """Keys, refs and ids as sent by an adapter, usable as dict keys."""
    return value if value is None or isinstance(value, (str, int, float)) else repr(value)


def effect_items(items: Any) -> list[tuple[str, str | None]]:
    """(semantic key, knowledge) of each well-formed item of a finish's or checkpoint's
    ``effects`` list; knowledge is None when it is not a string."""
    out = []
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict):
                k = item.get("semantic_key", item.get("key"))
                if isinstance(k, str):
                    knowledge = item.get("knowledge")
                    out.append((k, knowledge if isinstance(knowledge, str) else None))
    return out


def read_records(value: Any) -> list[dict]:
    """The records a service read answered: a search's ``records``, or a lookup's ``record``
    when it was found (anything that is not an object is left out)."""
    value = obj(value)
    if isinstance(value.get("records"), list):
        records = value["records"]
    else:
        records = [value.get("record")] if value.get("found") else []
    return [r for r in records if isinstance(r, dict)]


def shown(value) -> str:
    """A value as a message shows it: text as itself, nothing as \u201cnothing\u201d, anything else
    as JSON (never a Python repr)."""
    import json

    if value is None:
        return "nothing"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)

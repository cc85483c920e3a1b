"""A scenario's evidence names (``port.op``, ``ledger:STATE``, ...) and the effects they may name:
read by the loader for ``expect`` and ``absent``."""
from __future__ import annotations

import re
from typing import Any
from ..vocab.model import PLATFORM_PORTS, SERVICE_OPS
from .format import DISPOSITIONS, EVIDENCE_FORMS, KNOWLEDGE, TRACE_KINDS
from .yaml import _choice


# --------------------------------------------------------------------------- scenario values
_EVIDENCE = re.compile(r"^(?:(?P<port>[a-z_]+)\.(?P<op>[a-z_]+)|(?P<prefix>ledger|checkpoint|finish):(?P<state>[A-Z_]+)"
                       r"|(?P<kind>[a-z_]+))$")


def _evidence_any(value: Any, services: dict) -> str:
    """An expect.evidence item: one item, alternatives joined by '|' (any one of them), each
    alternative one item or parts joined by '&' (all of them), a part prefixed '!' (it never occurs)."""
    if isinstance(value, str) and any(c in value for c in "|&!"):
        alts = value.split("|")
        for alt in alts:
            for part in alt.split("&"):
                _evidence(part[1:] if part.startswith("!") else part, services)
        if len(set(alts)) != len(alts):
            raise ValueError(f"{value!r} names an alternative twice")
        return value
    return _evidence(value, services)


def _absent_item(value: Any, services: dict) -> str:
    """An expect.absent item: one evidence item, or parts joined by '&' that must not occur
    together (``finish:CANCELLED_EFFECT_UNKNOWN&ledger:CONFIRMED``: either alone is allowed)."""
    if isinstance(value, str) and any(c in value for c in "|!"):
        raise ValueError(f"{value!r}: expect.absent takes an item or items joined by '&' (both together "
                         "are forbidden); alternatives '|' and '!' belong in expect.evidence")
    if isinstance(value, str) and "&" in value:
        parts = value.split("&")
        for part in parts:
            _evidence(part, services)
        if len(set(parts)) != len(parts):
            raise ValueError(f"{value!r} names a part twice")
        return value
    return _evidence(value, services)


def _evidence(value: Any, services: dict) -> str:
    m = _EVIDENCE.match(value) if isinstance(value, str) else None
    if m is None:
        raise ValueError(f"{value!r} is not an evidence item; use one of: {', '.join(EVIDENCE_FORMS)}")
    if m["port"]:
        ports = {**PLATFORM_PORTS, **{s: SERVICE_OPS[s] for s in services}}
        _choice(ports, "port in an evidence item")(m["port"])
        _choice(ports[m["port"]], f"operation of {m['port']} in an evidence item")(m["op"])
    elif m["prefix"]:
        states = {"ledger": KNOWLEDGE, "checkpoint": DISPOSITIONS, "finish": DISPOSITIONS}[m["prefix"]]
        _choice(states, f"state after '{m['prefix']}:'")(m["state"])
    else:
        _choice(TRACE_KINDS, "trace event kind")(m["kind"])
    return value

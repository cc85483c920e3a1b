"""The port boundary: every value that crosses between an adapter and the world, copied and checked.

An adapter's port call (its arguments) and the world's answer (a result) cross the boundary
*by value*, in-process exactly as over the wire (docs/protocol.md), so that neither side can
reach into the other's objects: an adapter that mutates what it sent cannot rewrite the call the
trace recorded, and one that mutates a result cannot rewrite the world's stores.

* :func:`adapter_value` copies what an adapter sends and checks it against the protocol's limits
  (JSON values only, ``MAX_DEPTH`` nesting, integers within +-``MAX_INT``, finite numbers,
  ``MAX_LINE_BYTES`` in size, valid Unicode): a value beyond them is a TypeError naming the first
  limit broken, which the drivers record as an adapter fault;
* :func:`harness_value` copies a result the world hands to an adapter, :func:`harness_error` the
  error an in-process adapter is thrown instead (its details copied);
* :func:`json_copy` is the exact, slower copy both fall back on (and the check of every request
  line a subprocess adapter writes);
* :func:`adapter_call` is a call an in-process adapter awaited, by value: ``port`` and ``op``
  strings and an ``args`` object (what a request line must hold over the wire), or TypeError;
* :func:`refuse_malformed` checks a call's arguments against their documented shape
  (crashlab.world.ports.ARGUMENTS), for both drivers alike: a missing, unknown or ill-typed field is a
  ``bad_request`` answer naming the port, the operation and the field, before the world sees it.
"""
from __future__ import annotations

from typing import Any

import orjson

from ..vocab.errors import clip
from ..vocab.model import PortCall
from .ports import ANY, ARGUMENTS, PortError, type_names

# What an adapter may send, in-process or over the wire (docs/protocol.md, "Limits").
MAX_LINE_BYTES = 1 << 20           # one request line; in-process, the same budget on a call's size
MAX_DEPTH = 64                     # nesting of objects and arrays in one request
MAX_INT = (1 << 63) - 1            # integers are within +-(2**63 - 1); floats are finite


_SCALARS = frozenset({str, int, float, bool, type(None)})
#: Values a JSON round trip gives back as they are (not floats: NaN comes back null); the integers
#: the world answers with (times, versions, epochs) stay within 64 bits, which orjson writes.
_FLAT = frozenset({str, int, bool, type(None)})


class _Budget:
    """The remaining size budget of one value (characters of strings and keys, plus one per item)."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def json_copy(value: Any, *, depth: int = MAX_DEPTH, budget: _Budget | None = None) -> Any:
    """A deep copy of a JSON value (dicts with string keys, lists, scalars), within the limits
    (MAX_DEPTH nesting, integers within +-MAX_INT, finite floats, MAX_LINE_BYTES in size). Tuples
    become lists and str/int subclasses (enums) plain values, exactly as a JSON round trip would
    make them; anything else, or anything beyond a limit, raises TypeError naming it."""
    if budget is None:
        budget = _Budget(MAX_LINE_BYTES)
    kind = type(value)
    if kind is str:
        budget.left -= len(value)
        if budget.left < 0:
            raise TypeError(f"larger than {MAX_LINE_BYTES} bytes")
        if not value.isascii():
            _unicode(value)
        return value
    if kind is int:
        if -MAX_INT <= value <= MAX_INT:
            return value
        raise TypeError(f"integer beyond +-(2**63 - 1): {_clip_number(value)}")
    if kind is float:
        if value - value == 0.0:  # finite: NaN and infinities are not JSON
            return value
        raise TypeError(f"{value!r} is not a JSON number (only finite numbers are)")
    if kind in _SCALARS:
        return value
    if depth <= 0:
        raise TypeError(f"nested deeper than {MAX_DEPTH} levels")
    budget.left -= 1
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                if not isinstance(key, str):
                    raise TypeError(f"object keys must be strings, got {type(key).__name__} {key!r:.40}")
                key = str(key)
            budget.left -= len(key)
            if not key.isascii():
                _unicode(key)
            out[key] = json_copy(item, depth=depth - 1, budget=budget)
        return out
    if kind is list or kind is tuple:
        return [json_copy(item, depth=depth - 1, budget=budget) for item in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):       # its string data, as JSON writes it (str() of a str enum is "Cls.NAME")
        return json_copy(str.__str__(value), depth=depth, budget=budget)
    if isinstance(value, int):
        return json_copy(int(value), depth=depth, budget=budget)
    if isinstance(value, float):
        return json_copy(float(value), depth=depth, budget=budget)
    if isinstance(value, dict):
        return json_copy(dict(value), depth=depth, budget=budget)
    raise TypeError(f"{type(value).__name__} {clip(repr(value), 40)} is not a JSON value")


_DIGIT_MASK = bytes.maketrans(b"123456789", b"000000000")   # every digit -> "0", anything else unchanged
_LONG_RUN = b"0" * 19                      # 19 digits or more: maybe beyond +-(2**63 - 1)


def _huge_number(data: bytes) -> bool:
    """Whether the serialised value may hold an integer beyond +-MAX_INT (a digit run in a string
    counts too: then json_copy decides). Each maximal run of 19 digits or more is read as an integer;
    the runs are found on a copy with every digit masked to "0" (a plain substring search)."""
    masked = data.translate(_DIGIT_MASK)
    start = masked.find(_LONG_RUN)
    while start != -1:
        end = start + len(_LONG_RUN)
        while end < len(masked) and masked[end] == 0x30:
            end += 1
        if int(data[start:end]) > MAX_INT:
            return True
        start = masked.find(_LONG_RUN, end)
    return False


def adapter_value(value: Any) -> Any:
    """What an adapter sends, as a copy within the limits of docs/protocol.md; TypeError names the
    first limit broken. The common case goes through orjson (C speed); anything unusual (tuples,
    NaN, huge numbers, deep nesting, surrogates, non-JSON types) is decided by ``json_copy``."""
    wide = False
    try:
        # 53-bit integers at most here: then no integer can be beyond +-MAX_INT and the scan
        # for long digit runs is not needed
        data = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except (orjson.JSONEncodeError, TypeError):
        try:  # integers up to 64 bits (then a scan of the digits decides), or anything orjson cannot write
            data, wide = orjson.dumps(value), True
        except (orjson.JSONEncodeError, TypeError):
            return json_copy(value)
    if len(data) > MAX_LINE_BYTES:
        raise TypeError(f"larger than {MAX_LINE_BYTES} bytes")
    copy = orjson.loads(data)
    # deeper than MAX_DEPTH takes more than MAX_DEPTH opening brackets, and as many closing ones
    deep = len(data) > 2 * MAX_DEPTH and len(data) - len(data.translate(None, b"[{")) > MAX_DEPTH \
        and not _shallow(copy, MAX_DEPTH)
    if copy != value or deep or (wide and _huge_number(data)):
        return json_copy(value)  # NaN and infinities come back as null; the rest needs a closer look
    return copy


def _shallow(value: Any, limit: int) -> bool:
    """True when the containers of a JSON value nest no deeper than ``limit`` (no recursion)."""
    if type(value) is not dict and type(value) is not list:
        return True
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > limit:
            return False
        for child in (item.values() if type(item) is dict else item):
            if type(child) is dict or type(child) is list:
                stack.append((child, level + 1))
    return True


def request_value(line: bytes) -> Any:
    """A request line a subprocess adapter wrote, parsed, when it is plain JSON within the limits
    (what orjson reads, no integer beyond +-MAX_INT, no deeper than MAX_DEPTH); None when it needs
    the exact, slower reading that names what is wrong (crashlab.run.drivers.parse_request, where
    a line ``null`` is read too). The line is at most MAX_LINE_BYTES, so no value in it is larger."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if _huge_number(line):
        return None      # orjson reads an integer beyond 64 bits as a float
    if len(line) > 2 * MAX_DEPTH and len(line) - len(line.translate(None, b"[{")) > MAX_DEPTH \
            and not _shallow(value, MAX_DEPTH):
        return None
    return value


def harness_value(value: Any) -> Any:
    """A copy of a result the world hands to an adapter (it may never mutate the stores). A flat
    object of plain strings, integers, booleans and nulls (most results) is copied as it is:
    the JSON round trip would give the same object."""
    if type(value) is dict and _FLAT.issuperset(map(type, value.values())):
        return dict(value)
    try:
        return orjson.loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        return json_copy(value, budget=_Budget(1 << 62))


def harness_error(error: PortError) -> PortError:
    """The error an in-process adapter is thrown for ``error``: a new PortError of the same code,
    message and definiteness with copied details. The world's own error (an ``error_replay``
    service keeps it) and its details (the trace's record of the answer holds that dict) never
    reach adapter code, so an adapter cannot rewrite what the trace says it was answered."""
    thrown = PortError(error.code, error.message, definite=error.definite)
    thrown.details = harness_value(error.details)
    return thrown


def _unicode(text: str) -> None:
    """Strings must be valid Unicode (a lone surrogate such as "\\ud800" cannot be written as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TypeError("a string holds a lone surrogate (not valid Unicode)") from None


def _clip_number(value: int) -> str:
    digits = value.bit_length() * 30103 // 100000 + 1
    return f"an integer of about {digits} digits"


# --------------------------------------------------------------------------- calls and their arguments
def adapter_call(value: PortCall) -> PortCall:
    """A copy of the call an in-process adapter awaited, within the limits: ``port`` and ``op``
    are strings and ``args`` an object of named arguments, as a request line must have them over
    the wire (docs/protocol.md "Envelope"). TypeError names what is wrong."""
    port, op, args = value.port, value.op, value.args
    if type(port) is str and type(op) is str and type(args) is dict:    # the common case, plain values
        return PortCall(port=port, op=op, args=adapter_value(args))
    for name, item in (("port", port), ("op", op)):
        if not isinstance(item, str):
            raise TypeError(f"{name} must be a string, got {type(item).__name__} {clip(repr(item), 40)}")
    if not isinstance(args, dict):
        raise TypeError(f"args must be an object of named arguments, got {type(args).__name__} "
                        f"{clip(repr(args), 40)}")
    return PortCall(port=str.__str__(port), op=str.__str__(op), args=adapter_value(args))


_MISSING = object()


class _Shape:
    """One operation's row of ARGUMENTS, compiled: the argument names it has, and per field its
    path, accepted types (exact: bool is not an integer) and whether it is required; ``flat``
    the same for an operation whose fields are all top-level (None for one with a nested field),
    what :func:`argument_problems` checks first."""

    __slots__ = ("known", "fields", "flat")

    def __init__(self, specs) -> None:
        self.known = frozenset(spec.path.split(".", 1)[0] for spec in specs)
        self.fields = tuple((spec.path, tuple(spec.path.split(".")), frozenset(spec.types), spec.required,
                             ANY in spec.types) for spec in specs)
        self.flat = None if any("." in spec.path for spec in specs) else tuple(
            (spec.path, None if ANY in spec.types else frozenset(spec.types), spec.required) for spec in specs)

    def fits(self, args: dict) -> bool:
        """Whether ``args`` surely fits (False: let the full check name what does not)."""
        if self.flat is None or not self.known.issuperset(args):
            return False
        for name, types, required in self.flat:
            value = args.get(name, _MISSING)
            if value is _MISSING:
                if required:
                    return False
            elif types is not None and type(value) not in types:
                return False
        return True


_SHAPES = {key: _Shape(specs) for key, specs in ARGUMENTS.items()}


def argument_problems(port: str, op: str, args: Any) -> list[tuple[str, str]]:
    """``(field, problem)`` for each way ``args`` breaks the shape of ``port.op``'s arguments
    (crashlab.world.ports.ARGUMENTS); empty when they fit, or when the operation is not in the table
    (the world answers an unknown operation itself)."""
    shape = _SHAPES.get((port, op))
    if shape is None:
        return []
    if type(args) is not dict:
        return [("args", f"expected an object, got {_json_name(args)}")]
    if shape.fits(args):
        return []
    return _problems(shape, args)


def _problems(shape: _Shape, args: dict) -> list[tuple[str, str]]:
    """Every way ``args`` breaks ``shape`` (the full check: nested fields, each problem named)."""
    problems = [(clip(name, 40), "not an argument of this operation") for name in args if name not in shape.known]
    for path, parts, types, required, anything in shape.fields:
        value: Any = args
        for part in parts:
            value = value.get(part, _MISSING) if type(value) is dict else _MISSING
        if value is _MISSING:
            if required and (len(parts) == 1 or type(args.get(parts[0])) is dict):
                problems.append((path, "missing"))
        elif not anything and type(value) not in types:
            names = tuple(t for t in (str, int, float, bool, dict, list, type(None)) if t in types)
            problems.append((path, f"expected {type_names(names)}, got {_json_name(value)}"))
    return problems


def refuse_malformed(call: PortCall) -> None:
    """Raise PortError ``bad_request`` when ``call``'s arguments break their documented shape,
    naming the port, the operation and every field at fault (``details.problems``)."""
    problems = argument_problems(call.port, call.op, call.args)
    if problems:
        where = f"{clip(call.port, 40)}.{clip(call.op, 40)}"
        raise PortError("bad_request", f"{where}: " + "; ".join(f"{f}: {p}" for f, p in problems[:4])
                        + (f" (and {len(problems) - 4} more)" if len(problems) > 4 else ""),
                        details={"field": problems[0][0],
                                 "problems": [f"{f}: {p}" for f, p in problems[:20]]})


def _json_name(value: Any) -> str:
    """The JSON type of a value, with a short quote of it: ``string 'soon'``."""
    kind = type_names((type(value),)) if type(value) in (str, int, float, bool, dict, list, type(None)) \
        else type(value).__name__
    return kind if value is None or isinstance(value, (dict, list)) else f"{kind} {clip(repr(value), 40)}"
